# %% [markdown]
# # Lesson 2: reverse mode, step by step
#
# A tinyad kernel is traced once into a small IR. Reverse mode is a transform from that IR to
# another IR, the *adjoint* kernel, which you can print. This lesson builds one kernel, prints
# both, runs them under a Tape, and checks the gradient against a formula.
# (NB: Taichi does the same transform in C++, in `MakeAdjoint`, where you cannot see it.)

# %%
import math

import numpy as np

import tinyad as ti
from tinyad.explain import (element_panel, formula_panel, side_by_side, tape_panel,
                            values_panel)

ti.init(default_fp=ti.f64)
x = ti.field(ti.f64, shape=3, needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def energy():
    for i in x:
        s = ti.sin(x[i])
        loss[None] += s * x[i]


x.from_numpy(np.array([0.1, 0.7, 1.3]))
print(energy.ir)

# %% [markdown]
# The primal IR above: the outermost loop is `parallel`; `s` is a local; `+=` on a global is
# an atomic add. Every line remembers where it came from (the `# file:line` comments).
#
# Now the adjoint. It has two sweeps: a *replay* that recomputes the locals from the fields as
# they are now (it writes no primal field), then the adjoints of the statements in reverse
# order. `x_adj`-style names hold adjoints of locals; `x.grad` holds the adjoint of a field.

# %%
print(energy.grad.ir)

# %% [markdown]
# Read it bottom-up against the primal: `loss[None] += s * x[i]` passes `loss.grad` on to
# `s` (times `x[i]`) and to `x[i]` (times `s`); then `s = sin(x[i])` passes `s_adj * cos(x[i])`
# to `x.grad[i]`. The Tape records launches and, on exit, seeds `loss.grad = 1` and runs the
# adjoints in reverse order. Inside the Tape, the rule checker's replay witness already
# knows what the adjoint will need: `energy`'s adjoint replays its read of `x[1]`. Nothing is
# copied while no write comes near that element; a write that might would copy it first, and
# a change is a Global Data Access Rule 1 error naming both lines.

# %%
with ti.ad.Tape(loss=loss) as tape:
    energy()
    element = element_panel(x, 1)
print(side_by_side(tape_panel(tape), values_panel(x, loss), element))
print(side_by_side(formula_panel(energy, loss)))
for i in range(3):
    xi = x[i]
    print(f"x[{i}] = {xi:.3f}  autodiff {x.grad[i]:+.6f}  formula "
          f"{math.sin(xi) + xi * math.cos(xi):+.6f}")

# %% [markdown]
# ## Locals changed inside a loop
#
# When a local is overwritten inside a serial loop, its old values are gone by the time the
# adjoint runs backwards. The adjoint therefore `save`s each old value on a stack during the
# replay and `restore`s it just before the statement's adjoint (Taichi's "adstack"; here it
# grows as needed and never overflows). Only a local carried from one iteration to the next
# needs that: a loop whose body uses only locals it assigns itself (Taichi scopes them to the
# body) replays each iteration just before that iteration's adjoint, with no stack.

# %%
y = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def iterate(n: ti.i32):
    v = x[0]
    for k in range(n):
        v = ti.sin(v) * 0.9 + x[1]
    y[None] = v


print(iterate.grad.ir)
with ti.ad.Tape(loss=y):
    iterate(20)
print("dy/dx0 =", x.grad[0], " dy/dx1 =", x.grad[1])
