# expect: TinyadSyntaxError: Return inside non-static if
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k() -> ti.f32:
    if x[0] > 0:
        return x[0]  # <- error
    x[1] = 2.0
    return 0.0

k()
