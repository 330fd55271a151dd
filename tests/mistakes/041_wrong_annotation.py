# expect: TinyadTypeError: not a tinyad dtype
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k(a: str):
    x[0] = 1.0

k("a")  # <- error
