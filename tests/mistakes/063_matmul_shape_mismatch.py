# expect: TinyadTypeError: (2, 3)
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    a = ti.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    c = a @ a  # <- error
    x[0] = c[0, 0]

k()
