# expect: warning: can only produce zeros
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        x[i] = x[i] * 2

k()
k.grad()  # <- error
