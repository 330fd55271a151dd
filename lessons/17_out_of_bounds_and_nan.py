# %% [markdown]
# # Lesson 17: index -1 and 0/0, which Taichi lets through
#
# A volume raycaster (Differender's, one of the real programs run for tinyad's compatibility
# page) has two bugs that Taichi 1.7.4 runs without a word: it reads the sample before the
# first one, at index -1, and it divides 0 by 0 on a ray with a single sample. The first gives
# a wrong image; the second leaves NaN in the gradient, which its author cleared with
# `nan_to_num`. Here is a small program with the same two bugs: three rays through a 1-D
# volume, each composited front to back into `tape` (the opacity after each sample), the loss
# the sum of the rays' final opacities, and its gradient with respect to `near` and `far`,
# where the rays enter and leave the volume.

# %%
import numpy as np

import tinyad as ti

ti.init(default_fp=ti.f64)
n_rays, max_samples = 3, 4
samples = ti.field(ti.i32, shape=n_rays)
density = ti.field(ti.f64, shape=5)
near = ti.field(ti.f64, shape=(), needs_grad=True)
far = ti.field(ti.f64, shape=(), needs_grad=True)
tape = ti.field(ti.f64, shape=(n_rays, max_samples), needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)

samples.from_numpy(np.array([4, 3, 1], np.int32))   # the last ray grazes
density.from_numpy(np.array([0.1, 0.3, 0.6, 0.2, 0.4]))
near[None], far[None] = 0.6, 3.3


@ti.func
def lookup(x):
    """The density at x, linearly interpolated, x clamped to [0, 4)."""
    x = ti.min(ti.max(x, 0.0), 3.999)
    i = int(ti.floor(x))
    f = x - i
    return (1 - f) * density[i] + f * density[i + 1]


def run(render):
    tape.fill(0.0)                  # an empty tape, and a zero loss, for each render
    loss[None] = 0.0
    with ti.ad.Tape(loss):
        render()


# %% [markdown]
# ## 1. The sample before the first
#
# Each sample adds its opacity to what the samples before it left: `tape[r, s - 1]`. At the
# first sample that is `tape[r, -1]`. Taichi does not check indices (unless
# `ti.init(debug=True)`): it reads the element that lies before `tape[r, 0]` in memory, the
# last sample of the ray before. Run under Taichi 1.7.4, ray 1 starts from ray 0's final
# opacity, 0.8222, and ends at 0.9574 instead of 0.7605 (the rays run in parallel, so what
# it reads depends on the schedule). The adjoint does the same with `tape.grad[0, -1]`, the
# element before `tape.grad` in memory, which in that run was `tape[2, 3]`: after the Tape it
# held 0.1778, stored by no line of the program. tinyad checks every index, in both modes:

# %%
@ti.kernel
def render_as_written():
    for r in range(n_rays):
        n = samples[r]
        for s in range(n):
            u = float(s) / float(n - 1)
            alpha = lookup(near[None] + (far[None] - near[None]) * u)
            tape[r, s] = tape[r, s - 1] + (1 - tape[r, s - 1]) * alpha
        loss[None] += tape[r, n - 1]


try:
    run(render_as_written)
except ti.TinyadIndexError as error:
    print(error)

# %% [markdown]
# The fix says what the author meant: before the first sample the ray is empty.

# %%
@ti.kernel
def render_empty_start():
    for r in range(n_rays):
        n = samples[r]
        for s in range(n):
            u = float(s) / float(n - 1)
            alpha = lookup(near[None] + (far[None] - near[None]) * u)
            before = 0.0
            if s > 0:
                before = tape[r, s - 1]
            tape[r, s] = before + (1 - before) * alpha
        loss[None] += tape[r, n - 1]


run(render_empty_start)     # the report is shown: a warning, as nothing has read far.grad
try:
    print("far.grad =", far.grad[None])      # the read that would use the NaN: the error
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# ## 2. A 0/0 that only the gradient keeps
#
# The grazing ray has one sample, so `u = 0 / 0`, a NaN. The image does not show it:
# `ti.max` drops a NaN (as C's `fmax` does), so the clamp in `lookup` turns the NaN position
# into 0 and the opacity is finite. The gradient keeps it: the derivative of the position with
# respect to `far` is `u` itself, and 0 (the clamp's adjoint) times NaN is NaN. Taichi returns
# `near.grad = nan` and `far.grad = nan`. tinyad names the division, the adjoint line that
# wrote the NaN, and the fix: as a warning when the backward pass ends (a gradient nobody reads
# may stay NaN), and as the error where the program reads it.
#
# `np.nan_to_num` would return 0 for both. The grazing ray's share of the gradient is
# undefined, but the other two rays' share is not, and the NaN, added to the same element,
# took it too. Finite differences of the same program (the grazing ray's sample is stuck at
# x = 0 there, so only the other two rays move):

# %%
def central_difference(render, param, h=1e-6):
    values = []
    for step in (h, -h):
        param[None] += step
        loss[None] = 0.0
        render()
        values.append(loss[None])
        param[None] -= step
    return (values[0] - values[1]) / (2 * h)


print("d loss / d near =", round(central_difference(render_empty_start, near), 6),
      " nan_to_num gives 0.0")
print("d loss / d far  =", round(central_difference(render_empty_start, far), 6),
      " nan_to_num gives 0.0")

# %% [markdown]
# ## 3. Guard the argument, not the result
#
# `nan_to_num` on the gradient comes too late: the NaN has already been added to the good
# rays' share. Guard what goes into the division instead, as tinyad's report says: the lone
# sample then sits at `near`, where it belongs (the NaN had also put it at x = 0, outside the
# ray), and every derivative is finite.

# %%
@ti.kernel
def render():
    for r in range(n_rays):
        n = samples[r]
        for s in range(n):
            u = float(s) / float(ti.max(n - 1, 1))
            alpha = lookup(near[None] + (far[None] - near[None]) * u)
            before = 0.0
            if s > 0:
                before = tape[r, s - 1]
            tape[r, s] = before + (1 - before) * alpha
        loss[None] += tape[r, n - 1]


run(render)
print("loss =", round(loss[None], 6), " final opacities =",
      [round(tape[r, samples[r] - 1], 4) for r in range(n_rays)])
print("near.grad =", round(near.grad[None], 6), " finite differences:",
      round(central_difference(render, near), 6))
print("far.grad  =", round(far.grad[None], 6), " finite differences:",
      round(central_difference(render, far), 6))

# %% [markdown]
# Both reports name the line. What they cannot tell is intent: whether a grazing ray should
# have one sample at `near` or none at all is the author's choice; tinyad only insists that
# the gradient of the program as written is finite and right.
