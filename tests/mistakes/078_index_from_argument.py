# expect: TinyadIndexError: field v
# modes: fast-debug
import tinyad as ti

v = ti.Vector.field(3, ti.f32, shape=2)


@ti.kernel
def k(n: ti.i32):
    v[n][0] = 1.0  # <- error

k(5)
