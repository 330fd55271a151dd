# expect: AutodiffRuleError: break
import tinyad as ti

x = ti.field(ti.f32, shape=4, needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def k():
    for i in x:
        for j in range(4):
            if j > i:
                break  # <- error
            loss[None] += x[j]


k()
k.grad()
