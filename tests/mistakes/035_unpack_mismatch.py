# expect: TinyadSyntaxError: unpack
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    a, b = ti.Vector([1.0, 2.0, 3.0])  # <- error
    x[0] = a + b

k()
