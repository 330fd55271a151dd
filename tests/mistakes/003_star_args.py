# expect: TinyadSyntaxError: *values
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k(*values):  # <- error
    x[0] = 1.0

k(1.0, 2.0)
