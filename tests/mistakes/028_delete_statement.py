# expect: TinyadSyntaxError: Delete
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    a = x[0]
    del a  # <- error

k()
