# expect: TinyadSyntaxError: GeneratorExp
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    x[0] = sum(x[i] for i in range(4))  # <- error

k()
