# expect: TinyadSyntaxError: Nonlocal
import tinyad as ti

x = ti.field(ti.f32, shape=4)

def make():
    total = 0.0

    @ti.kernel
    def k():
        nonlocal total  # <- error
        x[0] = 1.0
    return k


make()()
