"""A Taichi program whose gradient is silently wrong in Taichi (its docs' own example).

    tinyad check examples/broken_rule1.py           # names the read, the overwrite, the values
    tinyad run examples/broken_rule1.py             # stops there with that report, exit status 1
    tinyad run --no-check examples/broken_rule1.py  # runs it like Taichi: x.grad[1] = 110, not 10
"""
import argparse

import taichi as ti

argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help
ti.init()

N = 16
x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
b = ti.field(dtype=ti.f32, shape=(), needs_grad=True)


@ti.kernel
def func_broke_rule_1():
    loss[None] = x[1] * b[None]
    b[None] += 100


for i in range(N):
    x[i] = i
b[None] = 10
with ti.ad.Tape(loss):
    func_broke_rule_1()
print("x.grad[1] =", x.grad[1], "(the true gradient is 10)")
