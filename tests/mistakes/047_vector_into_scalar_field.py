# expect: TinyadTypeError: cannot assign a (2,) value
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    x[0] = ti.Vector([1.0, 2.0])  # <- error

k()
