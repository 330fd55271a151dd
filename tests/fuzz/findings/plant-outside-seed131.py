# disagreed (fixed since: the report names the launch being differentiated): reports differ: read.iteration, read.launch, write.iteration
# planted: k7: x[i] += 0.50, after the forward
import tinyad as ti

N = 4
T = 2


def build(fp):
    x = ti.field(fp, shape=N, needs_grad=True)
    wd = ti.field(fp, shape=N)
    st2 = ti.field(fp, shape=(T + 1, N), needs_grad=True)
    idx = ti.field(ti.i32, shape=N)
    loss = ti.field(fp, shape=(), needs_grad=True)

    @ti.func
    def f1(a, b):
        return ti.asin(0.9 * ti.sin(ti.sqrt(0.25 + (a) ** 2)))

    @ti.kernel
    def k3():
        for i in range(N):
            st2[0, i] = ti.tan(ti.sin((x[idx[i]]) ** 2))

    @ti.kernel
    def k4(t: ti.i32):
        for i in range(N):
            st2[t + 1, i] = ti.tanh(0.222 * ti.sin((1.79 - x[idx[i]])) + 0.37 * st2[t, i])

    @ti.kernel
    def k5():
        for i in range(N):
            ti.atomic_add(loss[None], st2[0, i])

    @ti.kernel
    def k6():
        for i in range(N):
            loss[None] += 0.17 * x[i] * x[i]

    @ti.kernel
    def k7():
        for i in range(N):
            x[i] += 0.50

    return dict(params=[x],
                data=[wd], ints=[idx], loss=loss,
                state=[st2],
                launches=[(k6, ()), (k3, ()), (k4, (0,)), (k4, (1,)), (k5, ())],
                sweep=[(k5, ()), (k4, (1,)), (k4, (0,)), (k3, ()), (k6, ())],
                rounds=1, between=[(k7, ())])
