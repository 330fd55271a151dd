# expect: TinyadSyntaxError: return type
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    return x[0]  # <- error

k()
