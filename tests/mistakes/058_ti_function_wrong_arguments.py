# expect: TinyadTypeError: sqrt
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    x[0] = ti.sqrt(x[1], x[2])  # <- error

k()
