# %% [markdown]
# # Lesson 10: recursive formulas, explicit taping, and control flow on a counter
#
# Guideline (Taichi issue #2485): build a differentiable program forward-first in small steps,
# and check the gradient after each step (`ti.ad.verify`), instead of writing the whole forward
# pass and differentiating at the end. Recursive formulas are where that pays off. An
# exponentially weighted moving average, e_c = 0.5 e_(c-1) + 0.5 d_c, keeps one running value
# per row, the way one would write it in numpy. Issue #2425 reports wrong gradients from
# Taichi for this pattern. First without checks:

# %%
import numpy as np

import tinyad as ti

ti.init(check="off")
rows, cols = 2, 4
data = ti.field(ti.f32, shape=(rows, cols), needs_grad=True)
ewma = ti.field(ti.f32, shape=rows, needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def running_ewma():
    for row in range(rows):
        for col in range(cols):
            ewma[row] = ewma[row] * 0.5 + data[row, col] * 0.5  # overwrites


@ti.kernel
def calc_loss():
    for row in range(rows):
        loss[None] += ewma[row] ** 2


values = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 4
data.from_numpy(values)
with ti.ad.Tape(loss):
    running_ewma()
    calc_loss()
print("data.grad =\n", data.grad.to_numpy())

# %% [markdown]
# ## What tinyad says
#
# Nothing, and rightly: with e starting at 0, d e_3 / d d_c = 0.5^(4-c), so the gradient
# above is 2 e_3 (1/16, 1/8, 1/4, 1/2) per row. tinyad's adjoint runs the serial inner loop
# backwards, saving each overwritten `ewma[row]`; the checker reports only reads whose replay
# would differ, and here none does. Explicit taping (next) is still the portable form.

# %%
ti.init()
data = ti.field(ti.f32, shape=(rows, cols), needs_grad=True)
ewma = ti.field(ti.f32, shape=rows, needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)
values = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 4
data.from_numpy(values)
try:
    with ti.ad.Tape(loss):
        running_ewma()
        calc_loss()
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# ## Explicit taping
#
# Keep every intermediate value in its own slot, a "tape" with a column axis:
# `ewma_tape[row, col]` is written once and read later, so nothing the adjoint replays is
# overwritten. The inner loop runs in order (it is not the parallel one).

# %%
ewma_tape = ti.field(ti.f32, shape=(rows, cols), needs_grad=True)


@ti.kernel
def taped_ewma():
    for row in range(rows):
        ewma_tape[row, 0] = data[row, 0]
        for col in range(1, cols):
            ewma_tape[row, col] = (ewma_tape[row, col - 1] * 0.5
                                   + data[row, col] * 0.5)


@ti.kernel
def taped_loss():
    for row in range(rows):
        loss[None] += ewma_tape[row, cols - 1] ** 2


def forward():
    taped_ewma()
    taped_loss()


with ti.ad.Tape(loss):
    forward()
print("data.grad =\n", data.grad.to_numpy())
print(ti.ad.verify(forward, loss, [data]).headline())

# %% [markdown]
# ## Control flow that reads a mutated counter
#
# The second program picks the column from an integer counter, `sample[row]`, and
# increments it in the same kernel. No float is overwritten, yet the gradient breaks: the
# adjoint replays `sample[row]` to find the column, and sees the final count. tinyad reports
# the integer field like any other. (The loss reads `ewma_tape[row_num, ...]`, one row
# past the end; here it reads the last row.)

# %%
sample = ti.field(ti.i32, shape=rows)


@ti.kernel
def ewma_by_counter():
    for row in range(rows):
        for col in range(cols):
            col_idx = sample[row]
            if col_idx == 0:
                ewma_tape[row, col_idx] = data[row, col_idx]
            else:
                ewma_tape[row, col_idx] = (ewma_tape[row, col_idx - 1] * 0.5
                                           + data[row, col_idx] * 0.5)
            sample[row] += 1   # Data Access Rule violation here


try:
    with ti.ad.Tape(loss):
        ewma_by_counter()
        taped_loss()
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# The fix from the issue: fill a tape of column indices before the Tape (`sample_tape[row,
# col] = col`), so the counter is never changed while it is being differentiated.

# %%
sample_tape = ti.field(ti.i32, shape=(rows, cols))


@ti.kernel
def prepare_sample_tape():
    for row in range(rows):
        for col in range(cols):
            sample_tape[row, col] = col


@ti.kernel
def ewma_by_tape():
    for row in range(rows):
        for col in range(cols):
            col_idx = sample_tape[row, col]
            if col_idx == 0:
                ewma_tape[row, col_idx] = data[row, col_idx]
            else:
                ewma_tape[row, col_idx] = (ewma_tape[row, col_idx - 1] * 0.5
                                           + data[row, col_idx] * 0.5)


def forward_by_tape():
    ewma_by_tape()
    taped_loss()


prepare_sample_tape()
print(ti.ad.verify(forward_by_tape, loss, [data]).headline())
print("data.grad =\n", data.grad.to_numpy())
