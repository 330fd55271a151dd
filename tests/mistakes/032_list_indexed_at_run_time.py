# expect: TinyadSyntaxError: run-time value
import tinyad as ti

x = ti.field(ti.f32, shape=4)

weights = [0.5, 0.25, 0.25]


@ti.kernel
def k():
    for i in range(3):
        x[i] = weights[i]  # <- error

k()
