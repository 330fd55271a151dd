# expect: TinyadSyntaxError: step
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in range(0, 4, 2):  # <- error
        x[i] = 1.0

k()
