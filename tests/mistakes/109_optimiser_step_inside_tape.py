# expect: warning: the kernel step reads x.grad inside the Tape
import tinyad as ti

x = ti.field(ti.f32, shape=4, needs_grad=True)
new_x = ti.field(ti.f32, shape=4)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def total():
    for i in x:
        loss[None] += x[i] ** 2


@ti.ad.no_grad
@ti.kernel
def step():
    for i in x:
        new_x[i] = x[i] - 0.1 * x.grad[i]  # <- error


x.fill(1.0)
with ti.ad.Tape(loss=loss):
    total()
    step()          # the backward pass has not run: x.grad is all zero here
