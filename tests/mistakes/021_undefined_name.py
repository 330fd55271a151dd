# expect: TinyadSyntaxError: scale
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        x[i] = scale * 2  # <- error  # noqa: F821

k()
