# expect: TinyadSyntaxError: assert
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        assert x[i] >= 0  # <- error

k()
