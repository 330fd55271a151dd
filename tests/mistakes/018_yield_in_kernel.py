# expect: TinyadSyntaxError: Yield
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        yield x[i]  # <- error

k()
