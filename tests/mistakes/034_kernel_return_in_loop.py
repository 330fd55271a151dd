# expect: TinyadSyntaxError: last statement
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def first_positive() -> ti.i32:
    for i in range(4):
        if x[i] > 0:
            return i  # <- error
    return -1

first_positive()
