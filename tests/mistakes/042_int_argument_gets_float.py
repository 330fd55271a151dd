# expect: TinyadTypeError: non-integer 1.5
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k(n: ti.i32):
    x[n] = 1.0

k(1.5)  # <- error
