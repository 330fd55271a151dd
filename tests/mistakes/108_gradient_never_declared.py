# expect: TinyadRuntimeError: x.grad does not exist
import tinyad as ti

x = ti.field(ti.f32, shape=3)        # no needs_grad=True
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def total():
    for i in x:
        loss[None] += x[i] ** 2


with ti.ad.Tape(loss):
    total()
print(x.grad.to_numpy())  # <- error
