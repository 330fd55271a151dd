# expect: TinyadTypeError: str
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    x[0] = "one"  # <- error

k()
