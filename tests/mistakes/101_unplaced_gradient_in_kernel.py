# expect: TinyadRuntimeError: x.grad has not been placed
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        x.grad[i] = 0.0  # <- error

k()
