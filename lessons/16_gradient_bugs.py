# %% [markdown]
# # Lesson 16: Warp's gradient bugs, each caught by tinyad
#
# NVIDIA Warp's gradient-debugging guide opens with "gradient bugs are almost never math
# bugs": the derivative rules are right, and the gradient is lost on the way, between
# kernels, in Python, or in a hand-written piece. Seven of its scenarios, as Taichi programs.
# Taichi runs each without a word; tinyad computes the right gradient or says which line lost
# it. The program: a state copied from the parameters, and an energy sum of squares.

# %%
import numpy as np

import tinyad as ti

ti.init(default_fp=ti.f64)
n = 4
x = ti.field(ti.f64, shape=n, needs_grad=True)
state = ti.field(ti.f64, shape=n, needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def energy():
    for i in state:
        loss[None] += state[i] ** 2


x.from_numpy(np.arange(1.0, n + 1))

# %% [markdown]
# ## 1. A copy in Python scope
#
# `state.copy_from(x)` looks like Python, but Taichi runs it as a kernel and its Tape
# differentiates it: the gradient flows back through the copy to `x`. tinyad does the same
# (d loss / d x = 2 x):

# %%
with ti.ad.Tape(loss):
    state.copy_from(x)
    energy()
print("x.grad =", x.grad.to_numpy())

# %% [markdown]
# ## 2. Reading the gradient inside the Tape
#
# An optimiser step written inside the `with` block reads `x.grad` before the backward pass
# has run: it holds zeros (the Tape cleared them) or the previous iterate's gradient. The step
# is silently wrong; tinyad warns, naming the Tape and the read:

# %%
with ti.ad.Tape(loss):
    state.copy_from(x)
    energy()
    step = x.grad.to_numpy()      # BAD: the backward pass runs when the block ends
print("step =", step)

# %% [markdown]
# ## 3. The loss computed after the Tape
#
# A kernel that computes the loss, launched after the `with` block: the Tape differentiated a
# loss that nothing inside it wrote, and every gradient is zero. This one is certain, so it
# is an error, at the late launch:

# %%
late = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def late_energy():
    for i in x:
        late[None] += x[i] ** 2


try:
    with ti.ad.Tape(late):
        state.copy_from(x)
    late_energy()                 # BAD: belongs inside the block
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# ## 4. A custom gradient with wrong math
#
# A hand-written gradient (`grad_replaced` / `grad_for`, a checkpointing segment) is trusted
# by Taichi, Warp and JAX alike. tinyad compares each one, the first time each line calls it
# under a Tape, with finite differences of its primal in f64 along random directions: here
# the adjoint of y = x^3 forgot a factor (3 x^2 written as x^2).

# %%
y = ti.field(ti.f64, shape=n, needs_grad=True)
cube_loss = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def cube_kernel():
    for i in x:
        y[i] = x[i] ** 3


@ti.kernel
def cube_kernel_adjoint():
    for i in x:
        x.grad[i] += y.grad[i] * x[i] ** 2     # BAD: the derivative is 3 x^2


@ti.kernel
def total():
    for i in y:
        cube_loss[None] += y[i]


@ti.ad.grad_replaced
def cube():
    cube_kernel()


@ti.ad.grad_for(cube)
def cube_adjoint():
    cube_kernel_adjoint()


try:
    with ti.ad.Tape(cube_loss):
        cube()
        total()
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# ## 5. A NaN in the gradient
#
# The length of a vector is `sqrt(d . d)`; at a zero vector its value is 0, fine, but its
# derivative `d / |d|` is 0 / 0. The NaN surfaces in the gradient, far from its cause. tinyad
# traces it back to the operation and the element, and says to guard the argument. When the
# backward pass leaves it, it is a warning (a simulation may leave NaN in gradients it never
# reads, as Taichi does); reading that gradient, or a kernel loading it, raises it:

# %%
p = ti.Vector.field(2, ti.f64, shape=2, needs_grad=True)
spread = ti.field(ti.f64, shape=(), needs_grad=True)


@ti.kernel
def distance():
    d = p[1] - p[0]
    spread[None] = ti.sqrt(d.dot(d))      # BAD at d = 0


p.from_numpy(np.ones((2, 2)))             # the two points coincide
with ti.ad.Tape(spread):
    distance()
try:
    print("p.grad =", p.grad.to_numpy())  # BAD: the NaN reaches the program here
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# ## 6. An optimiser step inside the Tape
#
# The same mistake as in step 2, in a kernel: the step launched inside the `with` block loads
# `x.grad` before the backward pass has filled it, so it moves `x` by zeros (or by the previous
# iterate's gradient). tinyad warns at the launch, naming the kernel's read:

# %%
@ti.ad.no_grad
@ti.kernel
def descend(lr: ti.f64):
    for i in x:
        x[i] -= lr * x.grad[i]


with ti.ad.Tape(loss):
    state.copy_from(x)
    energy()
    descend(0.1)                  # BAD: belongs after the block
print("x =", x.to_numpy(), "x.grad =", x.grad.to_numpy())

# %% [markdown]
# ## 7. A manual sweep that skips an adjoint
#
# Without a Tape, each kernel's `.grad()` is called by hand, in reverse launch order. A sweep
# that leaves one out (Warp's checkpointed segment that chains only some adjoints) stops the
# gradient at that kernel's output: here `copy_in.grad()` is missing, so `x.grad` stays zero.
# Looking at `x.grad` mid-sweep is fine (the sweep may go on); tinyad warns when the gradient
# is used as final (an optimiser step, a clear, a new Tape), naming the adjoint that did not run:

# %%
@ti.kernel
def copy_in():
    for i in x:
        state[i] = x[i]


x.grad.fill(0)
state.grad.fill(0)
loss[None] = 0.0
copy_in()
energy()
loss.grad[None] = 1.0
energy.grad()                     # BAD: copy_in.grad() should follow
print("x.grad =", x.grad.to_numpy())
descend(0.1)                      # the step uses the truncated gradient

# %% [markdown]
# Each report names the line to change. What tinyad cannot see is intent: a loss seeded with
# 1 where the program meant 1/N is a different function, correctly differentiated.
