# expect: TinyadSyntaxError: ClassDef
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    class Point:  # <- error
        pass
    x[0] = 1.0

k()
