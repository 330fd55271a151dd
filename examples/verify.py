"""Checking gradients: ti.ad.verify compares autodiff with sympy's derivative of the program.

A hand-written gradient (grad_replaced / grad_for) with a bug, 2 where 3 belongs, is caught;
the same program with the right gradient passes, with finite differences as a second truth.
"""
import argparse

import numpy as np

import tinyad as ti

argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # --help
ti.init(default_fp=ti.f64)
x = ti.field(ti.f64, shape=2, needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)
factor = ti.field(ti.f64, shape=())


@ti.kernel
def cube():
    for i in x:
        loss[None] += x[i] ** 3


@ti.kernel
def cube_grad():
    for i in x:
        x.grad[i] += factor[None] * x[i] ** 2 * loss.grad[None]


@ti.ad.grad_replaced
def forward():
    cube()


@ti.ad.grad_for(forward)
def backward():
    cube_grad()


x.from_numpy(np.array([0.5, 2.0]))
print("loss =", ti.ad.formula(forward, loss))

factor[None] = 2.0   # the bug
try:
    ti.ad.verify(forward, loss, [x])
except ti.GradientMismatchError as error:
    print(error.report.render())

factor[None] = 3.0   # fixed
print(ti.ad.verify(forward, loss, [x], method="both").render())
