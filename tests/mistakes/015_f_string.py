# expect: TinyadSyntaxError: JoinedStr
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    label = f"x0 = {x[0]}"  # <- error  # noqa: F841
    x[1] = 1.0

k()
