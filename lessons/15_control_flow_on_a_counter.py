# %% [markdown]
# # Lesson 15: control flow that reads a mutated integer field
#
# Seed 003's last trap: no float is overwritten, only an integer counter that steers the
# computation, and the gradient still goes wrong. A running mean per row, counting the
# samples seen in `count[row]`: the first sample starts the mean (weight 1), each later one
# moves it by (d - mean) / (seen + 1). No checks, as Taichi runs it:

# %%
import numpy as np

import tinyad as ti

ti.init(check="off")
rows, cols = 2, 4
data = ti.field(ti.f64, shape=(rows, cols), needs_grad=True)
mean = ti.field(ti.f64, shape=(rows, cols), needs_grad=True)   # taped
count = ti.field(ti.i32, shape=rows)
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def running_mean():
    for row in range(rows):
        for col in range(cols):
            seen = count[row]
            weight = 1.0                  # the first sample starts the mean
            if seen > 0:
                weight = 1.0 / (seen + 1)
            previous = mean[row, ti.max(col - 1, 0)]
            mean[row, col] = previous + (data[row, col] - previous) * weight
            count[row] += 1   # BAD: read above, changed here


@ti.kernel
def calc_loss():
    for row in range(rows):
        loss[None] += mean[row, cols - 1] ** 2


values = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols) / 4
data.from_numpy(values)
with ti.ad.Tape(loss):
    running_mean()
    calc_loss()
print("mean of each row =", mean.to_numpy()[:, -1])
print("data.grad =\n", data.grad.to_numpy().round(6))

# %% [markdown]
# The mean itself is right. Its gradient is not: the loss is sum over rows of m^2 with
# m = the row's mean, so d loss / d data[row, col] = 2 m / 4 for every column.

# %%
truth = np.repeat(2 * values.mean(axis=1, keepdims=True) / cols, cols, axis=1)
print("truth =\n", truth)

# %% [markdown]
# ## Why
#
# The adjoint kernel runs after the forward kernel and recomputes the values it needs from
# the fields. It reads `count[row]` again, and sees 4 in every iteration: every column takes
# the branch `seen > 0` with weight 1 / (4 + 1), the first column included. `tinyad explain` lists the
# reads the adjoint replays; `count[row]` is one of them:

# %%
from tinyad.explain import replay_notes

print(replay_notes(running_mean))

# %% [markdown]
# ## What tinyad says
#
# With the checks on, the increment stops the program: the integer field is reported like
# any float, naming the read that steers the branch and the write that changes it.

# %%
ti.init()
data = ti.field(ti.f64, shape=(rows, cols), needs_grad=True)
mean = ti.field(ti.f64, shape=(rows, cols), needs_grad=True)
count = ti.field(ti.i32, shape=rows)
loss = ti.field(ti.f64, shape=(), needs_grad=True)
data.from_numpy(values)
try:
    with ti.ad.Tape(loss):
        running_mean()
        calc_loss()
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# ## The fix
#
# Whatever steers control flow must hold the same value when the adjoint runs. Here the
# count is the column, known before the kernel runs: use the loop index (or, as the seed
# does, fill a tape of indices before the Tape, `sample_tape[row, col] = col`, and only read
# it inside). Then `ti.ad.verify` checks the gradient against sympy. (Lesson 10 runs the
# seed's own program, where `sample[row] += 1` picks the column, through the same report and
# fix.)

# %%
@ti.kernel
def running_mean_fixed():
    for row in range(rows):
        for col in range(cols):
            weight = 1.0
            if col > 0:
                weight = 1.0 / (col + 1)
            previous = mean[row, ti.max(col - 1, 0)]
            mean[row, col] = previous + (data[row, col] - previous) * weight


def forward():
    running_mean_fixed()
    calc_loss()


with ti.ad.Tape(loss):
    forward()
print("data.grad =\n", data.grad.to_numpy().round(6))
print(ti.ad.verify(forward, loss, [data]).headline())
