"""A plain Taichi program: it says `import taichi as ti`, and uses kernel.grad() directly.

The kernel.grad() example of Taichi's autodiff documentation. Run it under tinyad, unchanged:

    tinyad run examples/taichi_prog.py

`tinyad run` makes `import taichi` give tinyad, so no line here mentions tinyad.
"""
import argparse

import taichi as ti

argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help
ti.init()

N = 16

x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
loss2 = ti.field(dtype=ti.f32, shape=(), needs_grad=True)


@ti.kernel
def func():
    for i in x:
        loss[None] += x[i] ** 2
        loss2[None] += x[i]


for i in range(N):
    x[i] = i
loss.grad[None] = 1   # seed both outputs: the gradient is d(loss + loss2)/dx
loss2.grad[None] = 1

func()
func.grad()

print("running on:", ti.__name__)
print("loss  =", loss[None], "  loss2 =", loss2[None])
print("x.grad =", [x.grad[i] for i in range(N)])
for i in range(N):
    assert x.grad[i] == i * 2 + 1
print("x.grad[i] == 2 * i + 1 for every i: OK")
