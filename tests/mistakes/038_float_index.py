# expect: TinyadTypeError: indexed with a float
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        x[i * 0.5] = 1.0  # <- error

k()
