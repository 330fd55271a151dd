# expect: TinyadSyntaxError: while ... else
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    i = 0
    while i < 4:  # <- error
        i += 1
    else:
        x[0] = 1.0

k()
