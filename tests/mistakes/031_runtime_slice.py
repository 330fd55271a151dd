# expect: TinyadSyntaxError: run-time bounds
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k(n: ti.i32):
    v = ti.Vector([1.0, 2.0, 3.0])
    w = v[n:]  # <- error
    x[0] = w[0]

k(1)
