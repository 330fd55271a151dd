# expect: TinyadTypeError: by zero
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    x[0] = 1 // 0  # <- error

k()
