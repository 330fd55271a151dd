# expect: TinyadTypeError: double()
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.func
def double(v):
    return v * 2


@ti.kernel
def k():
    x[0] = double(1.0, 2.0)  # <- error

k()
