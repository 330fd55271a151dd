# expect: TinyadTypeError: `while` on a vector
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    v = ti.Vector([x[0], x[1]])
    while v:  # <- error
        v -= 1

k()
