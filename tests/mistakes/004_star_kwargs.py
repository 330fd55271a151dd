# expect: TinyadSyntaxError: **options
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k(**options):  # <- error
    x[0] = 1.0

k()
