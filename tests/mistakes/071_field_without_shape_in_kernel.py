# expect: TinyadRuntimeError: before it has a shape
import tinyad as ti

y = ti.field(ti.f32)


@ti.kernel
def k():
    y[0] = 1.0  # <- error

k()
