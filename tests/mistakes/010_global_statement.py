# expect: TinyadSyntaxError: Global
import tinyad as ti

x = ti.field(ti.f32, shape=4)

counter = 0


@ti.kernel
def k():
    global counter  # <- error
    x[0] = 1.0

k()
