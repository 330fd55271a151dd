# expect: ReadThenOverwriteRuleError: x
import tinyad as ti

x = ti.field(ti.f32, shape=4, needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def total():
    for i in x:
        loss[None] += x[i] ** 2


@ti.kernel
def reset():
    for i in x:
        x[i] = x[i] + 1.0  # <- error


with ti.ad.Tape(loss=loss):
    total()
    reset()
