# %% [markdown]
# # Lesson 12: forward mode, and when it pays
#
# Reverse mode (the Tape) runs the program, then its adjoint backwards, and gives the
# derivative of one output with respect to every input: a row of the Jacobian. Forward mode
# (`ti.ad.FwdMode`) carries a tangent along with every value as the program runs and gives the
# derivative of every output with respect to one input direction: a column. Tangents live in
# `.dual` fields (`needs_dual=True`, or `ti.root.lazy_dual()`). Taichi's docs' example:
# y_i = sum_j i sin(x_j), seeded with [1, 0], gives y.dual = dy/dx_0 = i cos(x_0).

# %%
import time

import numpy as np

import tinyad as ti

ti.init()
x = ti.field(dtype=ti.f32, shape=2, needs_dual=True)
y = ti.field(dtype=ti.f32, shape=5, needs_dual=True)


@ti.kernel
def compute_y():
    for i in range(5):
        for j in range(2):
            y[i] += i * ti.sin(x[j])


x.from_numpy(np.array([0.3, 1.1], dtype=np.float32))
with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0]):
    compute_y()
print("y.dual =", y.dual.to_numpy())
print("i cos(x_0) =", np.arange(5) * np.cos(np.float32(0.3)))

# %% [markdown]
# ## A field without a dual: the tangent is dropped
#
# Every field between the param and the output needs a dual. Here `mid` has none. Taichi runs
# this and hands back zeros, silently (`check="off"` shows it):

# %%
ti.init(check="off")
s = ti.field(ti.f32, shape=(), needs_dual=True)
mid = ti.field(ti.f32, shape=3)                 # BAD: no needs_dual
out = ti.field(ti.f32, shape=3, needs_dual=True)


@ti.kernel
def through_mid():
    for i in range(3):
        mid[i] = ti.sin(s[None] * (i + 1))
    for i in range(3):
        out[i] = mid[i] * mid[i]


s[None] = 0.5
with ti.ad.FwdMode(loss=out, param=s):
    through_mid()
print("out.dual =", out.dual.to_numpy(), " (silently zero)")

# %% [markdown]
# ## What tinyad says, and the fix
#
# With the checks on, the store into `mid` is reported, with its line. The fix is the one
# the report gives: `needs_dual=True` on `mid`. `ti.ad.verify(..., mode="fwd")` then checks
# the duals against sympy, one FwdMode sweep per parameter element. The truth by hand:
# d/ds sin^2((i+1) s) = (i+1) sin(2 (i+1) s).

# %%
ti.init()
s = ti.field(ti.f32, shape=(), needs_dual=True)
mid = ti.field(ti.f32, shape=3)
out = ti.field(ti.f32, shape=3, needs_dual=True)
s[None] = 0.5
try:
    with ti.ad.FwdMode(loss=out, param=s):
        through_mid()
except ti.AutodiffRuleError as error:
    print(error)

ti.init()
s = ti.field(ti.f32, shape=(), needs_dual=True)
mid = ti.field(ti.f32, shape=3, needs_dual=True)
out = ti.field(ti.f32, shape=3, needs_dual=True)
total = ti.field(ti.f32, shape=(), needs_dual=True)


@ti.kernel
def sum_out():
    for i in range(3):
        total[None] += out[i]


def forward():
    through_mid()
    sum_out()


s[None] = 0.5
with ti.ad.FwdMode(loss=out, param=s):
    through_mid()
print("out.dual =", out.dual.to_numpy())
print("by hand  =", np.arange(1, 4) * np.sin(2 * np.arange(1, 4) * 0.5))
print(ti.ad.verify(forward, total, [s], mode="fwd").headline())

# %% [markdown]
# ## Forward or reverse: a column or a row
#
# Two programs with n = 48. `spread` has one input and n outputs (y_j = sin((j+1) a)):
# its Jacobian is one column, one FwdMode sweep; reverse mode needs one sweep per output
# (`kernel.grad()` seeded with one output at a time). `energy` has n inputs and one output
# (E = sum x_i^2 sin x_i): its Jacobian is one row, one Tape; forward mode needs one
# sweep per input. Counted, and timed side by side
# (best of 3, in this process):

# %%
ti.init()
n = 48
a = ti.field(ti.f64, shape=(), needs_dual=True, needs_grad=True)
ys = ti.field(ti.f64, shape=n, needs_dual=True, needs_grad=True)
xs = ti.field(ti.f64, shape=n, needs_dual=True, needs_grad=True)
energy_total = ti.field(ti.f64, shape=(), needs_dual=True, needs_grad=True)


@ti.kernel
def spread():
    for j in range(n):
        ys[j] = ti.sin((j + 1) * a[None])


@ti.kernel
def energy():
    for i in range(n):
        energy_total[None] += xs[i] ** 2 * ti.sin(xs[i])


a[None] = 0.3
xs.from_numpy(np.linspace(0.1, 2.0, n))


def column_forward():              # d ys / d a: 1 sweep
    with ti.ad.FwdMode(loss=ys, param=a):
        spread()
    return ys.dual.to_numpy(), 1


def column_reverse():              # d ys / d a: n sweeps, one per output
    column = np.zeros(n)
    for j in range(n):
        spread()
        a.grad[None] = 0
        seed = np.zeros(n)
        seed[j] = 1
        ys.grad.from_numpy(seed)
        spread.grad()
        column[j] = a.grad[None]
    return column, n


def row_reverse():                 # d E / d xs: 1 sweep
    with ti.ad.Tape(energy_total):
        energy()
    return xs.grad.to_numpy(), 1


def row_forward():                 # d E / d xs: n sweeps, one per input
    row = np.zeros(n)
    for i in range(n):
        seed = np.zeros(n)
        seed[i] = 1
        with ti.ad.FwdMode(loss=energy_total, param=xs, seed=list(seed)):
            energy_total[None] = 0
            energy()
        row[i] = energy_total.dual[None]
    return row, n


def timed(way):
    """The result, the sweeps, and the best of 3 timed runs after one that
    traces (and in fast mode compiles) the kernels."""
    result, sweeps = way()
    seconds = []
    for _ in range(3):
        begin = time.perf_counter()
        way()
        seconds.append(time.perf_counter() - begin)
    return result, sweeps, min(seconds)


results = {}
for name, way in [("column, forward", column_forward),
                  ("column, reverse", column_reverse),
                  ("row, reverse", row_reverse),
                  ("row, forward", row_forward)]:
    results[name] = timed(way)
    _, sweeps, seconds = results[name]
    print(f"{name:16} {sweeps:3} sweeps  {seconds * 1000:8.1f} ms")

# %% [markdown]
# Both ways give the same numbers; the cheap way is the one whose sweep count is 1 (the
# reverse column costs more than n times: each of its sweeps also reruns `spread` and seeds
# `ys.grad` from Python). The rule
# of thumb (seed 002): reverse mode pays when inputs outnumber outputs (a loss and many
# parameters: machine learning, optimising a controller), forward mode when outputs
# outnumber inputs (the sensitivity of a whole simulated trajectory to one parameter), and
# a second derivative combines them (lesson 13).

# %%
column = results["column, forward"][0]
row = results["row, reverse"][0]
print("columns agree:", np.allclose(column, results["column, reverse"][0]))
print("rows agree:   ", np.allclose(row, results["row, forward"][0]))
slow_column = results["column, reverse"][2] / results["column, forward"][2]
slow_row = results["row, forward"][2] / results["row, reverse"][2]
print(f"the wrong mode took {slow_column:.0f}x (column)",
      f"and {slow_row:.0f}x (row)")
