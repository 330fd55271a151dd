# expect: TinyadSyntaxError: keyword-only
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k(*, a: ti.f32):  # <- error
    x[0] = a

k(a=1.0)
