# expect: TinyadSyntaxError: annotation
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k(a):  # <- error
    x[0] = a

k(1.0)
