# expect: TinyadSyntaxError: NamedExpr
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    if (first := x[0]) > 0:  # <- error
        x[1] = first

k()
