# expect: TinyadSyntaxError: another kernel
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def inner():
    x[0] = 1.0


@ti.kernel
def outer():
    inner()  # <- error

outer()
