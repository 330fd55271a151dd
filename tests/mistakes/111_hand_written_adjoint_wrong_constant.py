# expect: CustomGradientRuleError: cube_grad, a gradient kernel written by hand, is not the derivative of cube
import tinyad as ti

x = ti.field(ti.f32, shape=4, needs_grad=True)
y = ti.field(ti.f32, shape=4, needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def cube():
    for i in x:
        y[i] = x[i] ** 3


@ti.kernel
def total():
    for i in y:
        loss[None] += y[i]


@ti.kernel
def cube_grad():                 # cube's adjoint, written by hand
    for i in x:
        x.grad[i] += 2 * x[i] ** 2 * y.grad[i]  # <- error


x.fill(1.5)
cube()
total()
loss.grad[None] = 1.0
total.grad()
cube_grad()                      # in place of cube.grad(): the derivative is 3 x^2
