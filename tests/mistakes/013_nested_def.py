# expect: TinyadSyntaxError: nested function
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    def helper(v):  # <- error
        return v * 2
    x[0] = helper(1.0)

k()
