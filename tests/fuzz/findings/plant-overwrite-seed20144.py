# disagreed: reports differ: consequence, read.line
# planted: k11: x[i] += 0.88
import tinyad as ti

N = 5
T = 1


def build(fp):
    x = ti.field(fp, shape=N, needs_grad=True)
    m = ti.Matrix.field(3, 3, fp, shape=N, needs_grad=True)
    wd = ti.field(fp, shape=N)
    y1 = ti.field(fp, shape=N, needs_grad=True)
    yv6 = ti.Vector.field(2, fp, shape=N, needs_grad=True)
    idx = ti.field(ti.i32, shape=N)
    loss = ti.field(fp, shape=(), needs_grad=True)

    @ti.kernel
    def k2():
        for i in range(1, N - 1):
            t3 = ti.log(0.5 + ((ti.cast(i, fp) * 0.22)) ** 2)
            t4 = ti.min(ti.select(t3 >= m[(i + 1) % N].determinant(), x[i + 1], x[idx[i]]), (-1.22))
            b5 = ti.exp(((2.4 + 0.2 * ti.sin(t4)) % (1.0 + 0.05 * ti.sin((ti.cast(i, fp) * 0.48)) ** 2)))
            if x[i + 1] < x[i]:
                b5 = ti.math.atan(ti.log(0.5 + (x[i + 1]) ** 2))
            else:
                b5 = (ti.sin((-1.63)) + ti.acos(0.9 * ti.tanh(wd[(i + 1) % N])))
            ti.atomic_min(y1[(2 * i + 0) % N], x[i])

    @ti.kernel
    def k7():
        for i in range(N):
            w8 = ti.Vector([(2 * ti.tanh(ti.sqrt(0.25 + (ti.min((ti.cast(i, fp) * 0.34), x[idx[i]])) ** 2))), ti.tanh(((2.4 + 0.2 * ti.sin(m[i].trace())) % (1.0 + 0.05 * ti.sin((ti.cast(i, fp) * 0.30)) ** 2)))])
            yv6[i] = w8 * (2 * ti.tanh((ti.cast(i, fp) * 0.13)))

    @ti.kernel
    def k9():
        for i in range(N):
            ti.atomic_add(loss[None], 1.16 + (-0.43) * ti.tanh(0.0156 * yv6[(i + 2) % N].dot(yv6[i])))

    @ti.kernel
    def k10():
        for i in range(N):
            loss[None] += 0.89 * x[i] * x[i]

    @ti.kernel
    def k11():
        for i in range(3, N):
            x[i] += 0.88

    return dict(params=[x, m],
                data=[wd], ints=[idx], loss=loss,
                state=[y1, yv6],
                launches=[(k2, ()), (k7, ()), (k10, ()), (k9, ()), (k11, ())],
                sweep=None,
                rounds=1)
