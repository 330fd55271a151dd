# expect: TinyadIndexError: index (4,) is out of bounds for field x
# modes: fast-debug
import tinyad as ti

x = ti.field(ti.f32, shape=4)

y = ti.field(ti.f32, shape=4)


@ti.kernel
def k():
    for i in x:
        y[i] = x[i + 1]  # <- error

k()
