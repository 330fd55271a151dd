# expect: TinyadSyntaxError: Import
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    import math  # <- error
    x[0] = math.pi

k()
