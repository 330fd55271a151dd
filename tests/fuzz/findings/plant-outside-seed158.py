# disagreed: reports differ: consequence, kernel, read.iteration, read.kernel, read.launch, read.line, summary, write.iteration
# planted: k9: x[i] += 0.25, after the forward
import tinyad as ti

N = 5
T = 1


def build(fp):
    x = ti.field(fp, shape=N, needs_grad=True)
    v = ti.Vector.field(2, fp, shape=N, needs_grad=True)
    y2 = ti.field(fp, shape=N, needs_grad=True)
    yv4 = ti.Vector.field(3, fp, shape=N, needs_grad=True)
    idx = ti.field(ti.i32, shape=N)
    loss = ti.field(fp, shape=(), needs_grad=True)

    @ti.func
    def f1(a, b):
        return a

    @ti.kernel
    def k3():
        for i in range(N):
            y2[i] = x[(i + 2) % N]

    @ti.kernel
    def k5():
        for i in range(N):
            w6 = ti.Vector([ti.asin(0.9 * ti.sin(y2[i])), (y2[(i + 3) % N] if y2[idx[i]] <= y2[idx[i]] else ti.tan(ti.sin(x[(i + 3) % N]))), (-v[idx[i]].dot(v[idx[i]]))])
            yv4[i] = w6 * 0.26

    @ti.kernel
    def k7():
        for i in range(N):
            loss[None] += ti.math.atan(ti.sqrt(v[(i + 4) % N].norm_sqr() + 0.5)) + 0.95 * y2[idx[i]]

    @ti.kernel
    def k8():
        for i in range(N):
            loss[None] += 0.53 * x[i] * x[i]

    @ti.kernel
    def k9():
        for i in range(N):
            x[i] += 0.25

    return dict(params=[x, v],
                data=[], ints=[idx], loss=loss,
                state=[y2, yv4],
                launches=[(k8, ()), (k3, ()), (k5, ()), (k7, ())],
                sweep=[(k7, ()), (k3, ()), (k5, ()), (k8, ())],
                rounds=2, between=[(k9, ())])
