# expect: SilentZeroRuleError: Missing gradient on the path
import tinyad as ti

w = ti.field(ti.f32, shape=4, needs_grad=True)
y = ti.field(ti.f32, shape=4)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def scale():
    for i in w:
        y[i] = w[i] * 2  # <- error


@ti.kernel
def total():
    for i in y:
        loss[None] += y[i] ** 2


with ti.ad.Tape(loss=loss):
    scale()
    total()
