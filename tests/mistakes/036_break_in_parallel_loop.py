# expect: KernelSimplicityRuleError: break
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
def k():
    for i in x:
        if x[i] > 0:
            break  # <- error

k()
