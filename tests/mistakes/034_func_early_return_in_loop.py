# expect: TinyadSyntaxError: last statement
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.func
def first_positive():
    for i in range(4):
        if x[i] > 0:
            return i  # <- error
    return -1


@ti.kernel
def k():
    x[0] = first_positive()

k()
