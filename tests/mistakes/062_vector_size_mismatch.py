# expect: TinyadTypeError: shape mismatch
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    a = ti.Vector([1.0, 2.0])
    b = ti.Vector([1.0, 2.0, 3.0])
    c = a + b  # <- error
    x[0] = c[0]

k()
