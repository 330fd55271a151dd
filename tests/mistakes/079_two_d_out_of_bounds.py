# expect: TinyadIndexError: shape (4, 3)
# modes: fast-debug
import tinyad as ti

g = ti.field(ti.f32, shape=(4, 3))


@ti.kernel
def k():
    for i, j in g:
        g[i, j] = g[j, i]  # <- error

k()
