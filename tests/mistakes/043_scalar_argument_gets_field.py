# expect: TinyadTypeError: got Field
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k(a: ti.f32):
    x[0] = a

k(x)  # <- error
