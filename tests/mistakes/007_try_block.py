# expect: TinyadSyntaxError: Try
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    try:  # <- error
        x[0] = 1.0
    except Exception:
        pass

k()
