# expect: warning: but squash.grad() (forward launch #1, which wrote y) has not run
import tinyad as ti

x = ti.field(ti.f32, shape=4, needs_grad=True)
y = ti.field(ti.f32, shape=4, needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def squash():
    for i in x:
        y[i] = ti.sin(x[i])  # <- error


@ti.kernel
def total():
    for i in y:
        loss[None] += y[i] ** 2


x.fill(1.0)
squash()
total()
loss.grad[None] = 1.0
total.grad()                     # squash.grad() is never called: x.grad stays zero
x.from_numpy(x.to_numpy() - 0.1 * x.grad.to_numpy())
