# expect: TinyadSyntaxError: Lambda
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        double = lambda v: v * 2  # <- error  # noqa: E731
        x[i] = double(x[i])

k()
