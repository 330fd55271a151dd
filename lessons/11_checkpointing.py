# %% [markdown]
# # Lesson 11: checkpointing: recompute instead of storing
#
# A simulation under a Tape keeps every state the adjoint will replay. DiffTaichi's MPM keeps
# one grid for all steps and, in the backward pass, recomputes each step's grid from the
# particles: checkpointing, built from `grad_replaced` / `grad_for` (lesson 9). First the
# mistake it avoids: one scratch field `force`, overwritten every step, no checks.

# %%
import numpy as np

import tinyad as ti

ti.init(check="off")
n, steps, dt = 4, 6, 0.1
x = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)   # x[t, i]
force = ti.field(ti.f64, shape=n, needs_grad=True)   # one copy for all t
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def compute_force(t: ti.i32):
    for i in range(n):
        force[i] = ti.sin(x[t, i])


@ti.kernel
def advance(t: ti.i32):
    for i in range(n):
        x[t + 1, i] = x[t, i] * (1 + dt * force[i])


@ti.kernel
def compute_loss():
    for i in range(n):
        loss[None] += x[steps, i] ** 2


def simulate():
    for t in range(steps):
        compute_force(t)
        advance(t)
    compute_loss()


start = 0.5 + 0.25 * np.arange(n)
x.from_numpy(np.vstack([start, np.zeros((steps, n))]))
with ti.ad.Tape(loss):
    simulate()
print("x.grad[0, :] =", x.grad.to_numpy()[0].round(4), " (silently wrong)")

# %% [markdown]
# The truth, from numpy by central differences in f64: the same recurrence,
# x_(t+1) = x_t (1 + dt sin x_t), loss = sum x_T^2.

# %%
def loss_numpy(x0):
    xs = x0.copy()
    for _ in range(steps):
        xs = xs * (1 + dt * np.sin(xs))
    return (xs ** 2).sum()


h = 1e-6
truth = np.array([(loss_numpy(start + h * e) - loss_numpy(start - h * e))
                  / (2 * h) for e in np.eye(n)])
print("truth         =", truth.round(4))

# %% [markdown]
# ## What tinyad says
#
# `advance`'s adjoint needs force[i] of its own step, but the Tape replays it after later
# steps overwrote it. With the checks on, the second write stops the program:

# %%
ti.init()
x = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
force = ti.field(ti.f64, shape=n, needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)
x.from_numpy(np.vstack([start, np.zeros((steps, n))]))
try:
    with ti.ad.Tape(loss):
        simulate()
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# ## The fix: recompute in the backward pass
#
# `step(t)` is `grad_replaced`: the Tape records it as one call and, going backwards, runs
# `step_grad(t)` instead of the adjoints of the kernels inside. `step_grad` first recomputes
# `force` for step t (the checkpoint is x[t], which nothing overwrites), then runs the
# adjoints in reverse order. Memory: one `force` instead of one per step.
#
# tinyad's element checker cannot know that `step_grad` recomputes `force`, so it would
# still see the forward's overwrite; this part runs with `check="off"`, and `ti.ad.verify`
# is the check that proves the custom gradient right.

# %%
ti.init(check="off")
x = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
force = ti.field(ti.f64, shape=n, needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)
x.from_numpy(np.vstack([start, np.zeros((steps, n))]))


@ti.ad.grad_replaced
def step(t):
    compute_force(t)
    advance(t)


@ti.ad.grad_for(step)
def step_grad(t):
    compute_force(t)        # recompute this step's force from x[t]
    advance.grad(t)
    compute_force.grad(t)


def simulate_checkpointed():
    for t in range(steps):
        step(t)
    compute_loss()


with ti.ad.Tape(loss):
    simulate_checkpointed()
checkpointed_grad = x.grad.to_numpy()[0]
print("x.grad[0, :] =", checkpointed_grad.round(4))
report = ti.ad.verify(simulate_checkpointed, loss, [x])
print(report.headline())

# %% [markdown]
# ## A checkpoint that forgets to recompute
#
# The danger of a custom gradient is that nothing ties it to the program. Drop the
# recomputation, and every step's adjoint sees the last step's force. verify catches it.

# %%
@ti.ad.grad_replaced
def step_forgetful(t):
    compute_force(t)
    advance(t)


@ti.ad.grad_for(step_forgetful)
def step_forgetful_grad(t):
    advance.grad(t)         # BAD: force still holds the last step's values
    compute_force.grad(t)


def simulate_forgetful():
    for t in range(steps):
        step_forgetful(t)
    compute_loss()


try:
    ti.ad.verify(simulate_forgetful, loss, [x])
except ti.GradientMismatchError as error:
    print(error.report.headline())
