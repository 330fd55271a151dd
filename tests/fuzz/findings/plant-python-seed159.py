# disagreed: reports differ: consequence, kernel, read.iteration, read.kernel, read.launch, read.line
# planted: wd[2] += 0.5 in Python, in the Tape
import tinyad as ti

N = 4
T = 1


def build(fp):
    x = ti.field(fp, shape=N, needs_grad=True)
    wd = ti.field(fp, shape=N)
    yv4 = ti.Vector.field(3, fp, shape=N, needs_grad=True)
    y7 = ti.field(fp, shape=N, needs_grad=True)
    idx = ti.field(ti.i32, shape=N)
    loss = ti.field(fp, shape=(), needs_grad=True)

    @ti.func
    def f1(a):
        return a

    @ti.func
    def f2(a):
        t3 = ti.tanh(0.00681 * (1.0 + (ti.log(0.5 + (a) ** 2)) ** 2) ** (-0.28))
        return (-0.92)

    @ti.kernel
    def k5():
        for i in range(N):
            w6 = ti.Vector([(2 * ti.tanh((ti.atan2(wd[idx[i]], 1.0 + (x[idx[i]]) ** 2) + (wd[idx[i]] if i % 2 == 1 else x[i])))), (ti.cast(i, fp) * 0.42), x[(i + 1) % N]])
            yv4[i] = w6 * (-ti.abs((ti.cast(i, fp) * 0.16)))

    @ti.kernel
    def k8():
        for i in x:
            t9 = ((-0.67)) ** 3
            t10 = ti.exp((ti.tanh(0.0667 * yv4[idx[i]].sum()) if i % 2 == 0 else (ti.cast(i, fp) * 0.36)))
            s11 = ti.tanh(0.0667 * yv4[idx[i]].sum())
            j12 = 0
            while j12 < 1:
                s11 = 0.48 * s11 + (1 * ti.tanh(ti.cast(ti.cast(f2((ti.cast(i, fp) * 0.30)), fp), fp)))
                j12 += 1
            y7[i] = ti.acos(0.9 * ti.tanh(ti.tan(ti.sin(wd[i]))))

    @ti.kernel
    def k13():
        for i in range(N):
            ti.atomic_add(loss[None], ti.tanh(0.0667 * yv4[(i + 1) % N].sum()) + ti.asin(0.9 * ti.sin(x[(i + 1) % N])) + 0.31 * y7[i])

    @ti.kernel
    def k14():
        for i in range(N):
            loss[None] += 0.72 * wd[i] * x[i]

    return dict(params=[x],
                data=[wd], ints=[idx], loss=loss,
                state=[yv4, y7],
                launches=[(k5, ()), (k14, ()), (k8, ()), (k13, ())],
                sweep=None,
                rounds=1, python_write=(wd, 2))
