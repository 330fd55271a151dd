# expect: TinyadSyntaxError: two arguments
import tinyad as ti

x = ti.field(ti.f32, shape=4)


@ti.kernel
def k():
    for i in x:
        ti.atomic_add(x[0])  # <- error

k()
