# expect: TinyadIndexError: index (-1,)
# modes: fast-debug
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        x[i - 1] = 1.0  # <- error

k()
