# expect: TinyadSyntaxError: itself
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.func
def fact(n):
    return n * fact(n - 1)  # <- error


@ti.kernel
def k():
    x[0] = fact(3)

k()
