# expect: TinyadSyntaxError: ti.sin
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        x[i] = ti.sine(x[i])  # <- error

k()
