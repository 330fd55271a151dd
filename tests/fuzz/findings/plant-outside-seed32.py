# disagreed: reports differ: consequence, element, read.iteration, read.value, summary, write.iteration, write.value
# planted: k8: wd[i] += 0.54, after the forward
import tinyad as ti

N = 3
T = 1


def build(fp):
    x = ti.field(fp, shape=N, needs_grad=True)
    v = ti.Vector.field(3, fp, shape=N, needs_grad=True)
    wd = ti.field(fp, shape=N)
    ym2 = ti.Matrix.field(3, 3, fp, shape=N, needs_grad=True)
    idx = ti.field(ti.i32, shape=N)
    loss = ti.field(fp, shape=(), needs_grad=True)

    @ti.func
    def f1(a):
        return a

    @ti.kernel
    def k3():
        for i in range(N):
            w4 = ti.Vector([ti.abs(ti.math.atan(f1(1.74))), (2 * ti.tanh(ti.log(0.5 + ((3 * ti.tanh((x[i] + f1(ti.sqrt(v[i].norm_sqr() + 0.5)))))) ** 2))), wd[(i + 1) % N]])
            A5 = ti.Matrix([[ti.atan2(ti.log(0.5 + ((ti.cast(i, fp) * 0.46)) ** 2), 1.0 + (ti.acos(0.9 * ti.tanh((ti.cast(i, fp) * 0.28)))) ** 2), (2 * ti.tanh(ti.max(wd[(i + 2) % N], ((-1.96) + v[i][0])))), x[idx[i]]], [((2.4 + 0.2 * ti.sin(wd[i])) % (1.0 + 0.05 * ti.sin(ti.stop_grad(v[(i + 1) % N].sum())) ** 2)), ti.rsqrt(0.25 + (((2.4 + 0.2 * ti.sin(0.97)) % (1.0 + 0.05 * ti.sin(x[idx[i]]) ** 2))) ** 2), (ti.cast(i, fp) * 0.32)], [ti.math.atan(ti.abs((-1.86))), wd[i], (((2.4 + 0.2 * ti.sin(v[(i + 1) % N].sum())) % (1.0 + 0.05 * ti.sin(x[idx[i]]) ** 2)) * ti.cast(wd[idx[i]], fp))]])
            ym2[i] = A5 @ A5.transpose() * (-0.42) + w4.outer_product(w4)

    @ti.kernel
    def k6():
        for i in range(N):
            loss[None] += ti.tanh(0.0556 * ym2[i][2, 2])

    @ti.kernel
    def k7():
        for i in range(N):
            loss[None] += 0.53 * wd[i] * x[i]

    @ti.kernel
    def k8():
        for i in range(N):
            wd[i] += 0.54

    return dict(params=[x, v],
                data=[wd], ints=[idx], loss=loss,
                state=[ym2],
                launches=[(k3, ()), (k7, ()), (k6, ())],
                sweep=[(k6, ()), (k3, ()), (k7, ())],
                rounds=1, between=[(k8, ())])
