# expect: TinyadSyntaxError: Dict
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    weights = {"a": 1.0}  # <- error  # noqa: F841
    x[0] = 1.0

k()
