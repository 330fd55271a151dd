# expect: TinyadTypeError: matrix in a scalar
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k() -> ti.f32:
    return ti.Vector([x[0], x[1]])  # <- error

k()
