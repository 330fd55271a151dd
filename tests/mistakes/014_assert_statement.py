# expect: TinyadTypeError: assert needs one truth value
import tinyad as ti

x = ti.Vector.field(2, ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        assert x[i] >= 0  # <- error

k()
