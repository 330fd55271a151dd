# expect: TinyadTypeError: too many
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k(a: ti.f32):
    x[0] = a

k(1.0, 2.0)  # <- error
