# %% [markdown]
# # Lesson 1: a first derivative, by hand and by Tape
#
# Taichi's docs start from a kernel that computes y = sin(x). Its derivative, written by hand,
# is a second kernel, dy/dx = cos(x). That kernel must be rewritten every time the first one
# changes: error-prone. Here is the hand-written way first.

# %%
import math

import tinyad as ti

ti.init()
x = ti.field(dtype=ti.f32, shape=())
y = ti.field(dtype=ti.f32, shape=())
dy_dx = ti.field(dtype=ti.f32, shape=())


@ti.kernel
def compute_dy_dx():
    dy_dx[None] = ti.cos(x[None])


x[None] = 0.7
compute_dy_dx()
print("by hand: dy/dx =", dy_dx[None], " at x =", x[None])

# %% [markdown]
# ## The Tape does it for you
#
# Three steps: declare the fields on the derivative chain with `needs_grad=True`; launch the
# kernels inside `with ti.ad.Tape(y):`; read dy/dx from `x.grad`. Only the forward kernel is
# written. (Taichi's older docs call it `ti.Tape` and fields `ti.var`; tinyad takes both.)

# %%
x = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
y = ti.field(dtype=ti.f32, shape=(), needs_grad=True)


@ti.kernel
def compute_y():
    y[None] = ti.sin(x[None])


x[None] = 0.7
with ti.ad.Tape(y):
    compute_y()
print("by Tape: dy/dx =", x.grad[None], " at x =", x[None])
print("cos(0.7) =", round(math.cos(0.7), 7))

# %% [markdown]
# ## What the Tape ran
#
# `compute_y.ir` is the traced kernel; `compute_y.grad.ir` the adjoint kernel that reverse mode
# made from it: it reads `y.grad` (seeded to 1 by the Tape), and adds `cos(x)` times it to
# `x.grad`. The `# 42` comments name the lesson line each IR line came from.

# %%
from tinyad.explain import show

show(compute_y)

# %% [markdown]
# ## The formula behind it
#
# `ti.ad.formula(run, loss)` replays the launches with sympy symbols for the fields and gives
# the loss as a formula; `ti.ad.verify` differentiates that formula and compares it with the
# Tape's gradient, element by element.

# %%
print("y =", ti.ad.formula(compute_y, y))
print(ti.ad.verify(compute_y, y, [x]).render())
