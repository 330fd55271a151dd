# expect: TinyadTypeError: missing a required argument
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k(a: ti.f32, b: ti.f32):
    x[0] = a + b

k(1.0)  # <- error
