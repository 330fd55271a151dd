# expect: TinyadSyntaxError: Raise
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    if x[0] < 0:
        raise ValueError("negative")  # <- error

k()
