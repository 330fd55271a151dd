# expect: TinyadSyntaxError: ti.static
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        if ti.static(x[i] > 0):  # <- error
            x[i] = 0.0

k()
