"""Quickstart: the derivative of y = sin(x), and the IR that computes it.

Run it:  tinyad run examples/quickstart.py      (or: python examples/quickstart.py)
"""
import argparse
import math

import tinyad as ti

argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help
ti.init()

x = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
y = ti.field(dtype=ti.f32, shape=(), needs_grad=True)


@ti.kernel
def compute_y():
    y[None] = ti.sin(x[None])


x[None] = 0.7
with ti.ad.Tape(y):  # records compute_y, then runs its adjoint with y.grad = 1
    compute_y()

print(f"y      = {y[None]:.6f}   (sin(x) = {math.sin(x[None]):.6f})")
print(f"dy/dx  = {x.grad[None]:.6f}   (cos(x) = {math.cos(x[None]):.6f})")

# Every kernel is traced to a small scalar IR; reverse mode turns that IR into another IR.
# Each line ends with the user's source line it came from.
print()
print("The kernel's IR (compute_y.ir):")
print(compute_y.ir)
print()
print("Its adjoint, made by reverse mode (compute_y.grad.ir):")
print(compute_y.grad.ir)
