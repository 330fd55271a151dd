# expect: TinyadTypeError: out of range
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    v = ti.Vector([1.0, 2.0, 3.0])
    v[3] = 0.0  # <- error
    x[0] = v[0]

k()
