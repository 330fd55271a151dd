# %% [markdown]
# # Lesson 5: where gradient fields come from: needs_grad, lazy_grad and place()
#
# A field gets a gradient field `.grad` in one of two ways: `needs_grad=True` when it is
# declared, or `ti.root.lazy_grad()`, which gives every float field that has none a `.grad`
# laid out like its primal. The shape comes from `shape=` or from `ti.root.dense(...).place()`.
# Taichi's docs never say how these combine (its issue #2485 asks); here are the combinations
# tinyad supports, each checked by differentiating `loss = sum(a * b)`.

# %%
import tinyad as ti

ti.init()
n = 4


def check(a, b, label):
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def product():
        for i in range(n):
            loss[None] += a[i] * b[i]

    for i in range(n):
        a[i], b[i] = i, 10 + i
    with ti.ad.Tape(loss):
        product()
    # d loss / d a_i = b_i
    print(f"{label:<40} a.grad = {a.grad.to_numpy()}")

# %% [markdown]
# ## 1. shape= with needs_grad=True (the basic way)

# %%
a = ti.field(ti.f32, shape=n, needs_grad=True)
b = ti.field(ti.f32, shape=n, needs_grad=True)
check(a, b, "shape= and needs_grad=True")

# %% [markdown]
# ## 2. place() with needs_grad=True
#
# The gradient is placed with its primal: placing `x` places `x.grad` in the same layout.

# %%
a = ti.field(ti.f32, needs_grad=True)
b = ti.field(ti.f32, needs_grad=True)
ti.root.dense(ti.i, n).place(a, b)
check(a, b, "place() and needs_grad=True")

# %% [markdown]
# ## 3. place() then ti.root.lazy_grad()
#
# No `needs_grad` anywhere: `lazy_grad()` gives every float field a gradient.

# %%
a = ti.field(ti.f32)
b = ti.field(ti.f32)
ti.root.dense(ti.i, n).place(a, b)
ti.root.lazy_grad()
check(a, b, "place() then lazy_grad()")

# %% [markdown]
# ## 4. Placing the gradient yourself, and lazy_grad() on top
#
# The case from issue #2485: `needs_grad=True`, `place(x)`, `place(x.grad)` and `lazy_grad()`
# all together. In tinyad `place(x)` has already placed `x.grad`, so placing it again is an
# error that says so, and `lazy_grad()` leaves a field that has a gradient alone.

# %%
a = ti.field(ti.f32, needs_grad=True)
b = ti.field(ti.f32, needs_grad=True)
ti.root.dense(ti.i, n).place(a, b)
try:
    ti.root.dense(ti.i, n).place(a.grad)
except ti.TinyadError as error:
    print("place(a.grad) again:", error)
ti.root.lazy_grad()
check(a, b, "needs_grad, place() and lazy_grad()")

# %% [markdown]
# A gradient field without a gradient placed is caught too: a Tape whose loss has no `.grad`
# refuses, and a field on the derivative path without one is reported by the checker (it
# would silently cut the chain in Taichi). tinyad stores every layout densely: `pointer` and
# `bitmasked` levels are accepted and behave as `dense`.

# %%
loss = ti.field(ti.f32, shape=())
try:
    with ti.ad.Tape(loss):
        pass
except ti.TinyadError as error:
    print(error)
