# expect: TinyadTypeError: integer
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        x[i] = x[i] & 1  # <- error

k()
