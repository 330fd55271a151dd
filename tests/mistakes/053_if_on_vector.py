# expect: TinyadTypeError: `if` on a vector
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    v = ti.Vector([x[0], x[1]])
    if v > 0:  # <- error
        x[2] = 1.0

k()
