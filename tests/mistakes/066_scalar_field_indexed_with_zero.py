# expect: TinyadTypeError: x[None]
import tinyad as ti

x = ti.field(ti.f32, shape=())


@ti.kernel
def k():
    x[0] = 1.0  # <- error

k()
