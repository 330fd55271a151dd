# %% [markdown]
# # Lesson 14: building a differentiable program forward-first
#
# Seed 003 (Taichi issue #2485) asks for guidelines: written PyTorch-style (the whole forward
# pass first, gradients at the end), a Taichi program meets the autodiff rules all at once,
# and its gradient is silently wrong with no hint where. The guidelines, as followed here:
#
# - Grow the forward pass in small steps, checking the gradient after each.
# - Give each value the adjoint needs its own slot: `u[t, i]`, not `u[i]`.
# - Write an element once; after that only accumulate into it with `+=`.
# - Keep kernels simple: one loop nest each, `ti.static` for short loops.
# - Compute indices and counters that steer control flow before the Tape.
# - Save memory (checkpointing) only once the gradient is right.
#
# Lessons 6 and 10, 7, 8, 15 and 11 show what breaking the last five does.
#
# The program: heat diffusing along a rod of n cells with diffusivity kappa, and the inverse
# problem: find kappa from the final temperatures. Step 1: one time step, checked.

# %%
import numpy as np

import tinyad as ti

ti.init()
n, steps = 12, 16
u = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)   # rule 2
kappa = ti.field(ti.f64, shape=(), needs_grad=True)
target = ti.field(ti.f64, shape=n)
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def diffuse(t: ti.i32):
    for i in range(n):
        left = u[t, ti.max(i - 1, 0)]
        right = u[t, ti.min(i + 1, n - 1)]
        u[t + 1, i] = u[t, i] + kappa[None] * (left - 2 * u[t, i] + right)


@ti.kernel
def misfit(t: ti.i32):
    for i in range(n):
        loss[None] += (u[t, i] - target[i]) ** 2        # rule 3


u0 = np.exp(-0.5 * (np.arange(n) - n / 2) ** 2)
u.from_numpy(np.vstack([u0, np.zeros((steps, n))]))
kappa[None] = 0.1


def one_step():
    diffuse(0)
    misfit(1)


print(ti.ad.verify(one_step, loss, [kappa, u]).headline())

# %% [markdown]
# ## Step 2: the whole simulation, still checked
#
# The time loop goes in Python, one launch a step; the loss reads the last row. The target
# is the simulation's own output at kappa = 0.2, so the inverse problem has a known answer.
# The formula of 16 steps outgrows sympy; `fallback=True` checks by central differences in
# f64 instead.

# %%
def simulate():
    for t in range(steps):
        diffuse(t)
    misfit(steps)


kappa[None] = 0.2
simulate()
target.from_numpy(u.to_numpy()[steps])
kappa[None] = 0.1
print(ti.ad.verify(simulate, loss, [kappa], fallback=True).headline())

# %% [markdown]
# ## Step 3: a tempting "optimisation", caught where it is made
#
# Memory: why keep 17 rows when two will do? Ping-pong between rows t % 2. Written at the
# end, this would be one silent wrong gradient among many changes; made as a step of its
# own, the checks name the line at once. Keep the time index (guideline 6 says when to save
# memory, and how: lesson 11).

# %%
ring = ti.field(ti.f64, shape=(2, n), needs_grad=True)


@ti.kernel
def diffuse_in_two_rows(t: ti.i32):
    for i in range(n):
        now, after = t % 2, (t + 1) % 2
        left = ring[now, ti.max(i - 1, 0)]
        right = ring[now, ti.min(i + 1, n - 1)]
        laplacian = left - 2 * ring[now, i] + right
        ring[after, i] = ring[now, i] + kappa[None] * laplacian


ring.from_numpy(np.vstack([u0, np.zeros(n)]))
try:
    with ti.ad.Tape(loss):
        for t in range(steps):
            diffuse_in_two_rows(t)
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# ## Step 4: only now, optimise
#
# The gradient is right, so gradient descent on kappa can trust it. Each round: a Tape
# around the simulation, then a step against the gradient.

# %%
kappa[None] = 0.1
history = []
for round_ in range(30):
    with ti.ad.Tape(loss):
        simulate()
    history.append(loss[None])
    kappa[None] -= 0.1 * kappa.grad[None]
print(f"loss {history[0]:.3g} -> {history[-1]:.3g},",
      f"kappa = {kappa[None]:.6f} (the answer: 0.2)")
