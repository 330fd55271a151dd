# disagreed: fast f64: gradient of m
# modes: ('interp', 'fast')
import tinyad as ti

N = 5
T = 3


def build(fp):
    x = ti.field(fp, shape=N, needs_grad=True)
    v = ti.Vector.field(2, fp, shape=N, needs_grad=True)
    m = ti.Matrix.field(3, 3, fp, shape=N, needs_grad=True)
    y1 = ti.field(fp, shape=N, needs_grad=True)
    idx = ti.field(ti.i32, shape=N)
    loss = ti.field(fp, shape=(), needs_grad=True)

    @ti.kernel
    def k2():
        for i in range(N):
            t3 = ti.rsqrt(0.25 + ((3 * ti.tanh(m[idx[i]].determinant()))) ** 2)
            t4 = (-x[idx[i]])
            b5 = (-ti.tan(ti.sin(v[(i + 4) % N][0])))
            if i % 2 == 1:
                b5 = ti.abs(((2.4 + 0.2 * ti.sin(t3)) % (1.0 + 0.05 * ti.sin(m[idx[i]].trace()) ** 2)))
            ti.atomic_min(y1[(3 * i + 1) % N], (m[idx[i]] @ m[idx[i]].transpose())[0, 2])

    @ti.kernel
    def k6():
        for i in range(N):
            loss[None] += (ti.asin(0.9 * ti.sin(m[i].determinant()))) ** 3 + 0.58 * y1[i]

    return dict(params=[x, v, m],
                data=[], ints=[idx], loss=loss,
                state=[y1],
                launches=[(k2, ()), (k6, ())],
                sweep=None,
                rounds=1)
