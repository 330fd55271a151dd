# expect: TinyadTypeError: the shapes differ
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    a = ti.Vector([1.0, 2.0])
    b = ti.Vector([1.0, 2.0, 3.0])
    x[0] = a.dot(b)  # <- error

k()
