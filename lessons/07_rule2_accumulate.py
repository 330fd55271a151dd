# %% [markdown]
# # Lesson 7: Global Data Access Rule 2: write once, then only +=
#
# "If a global field element is written more than once, then starting from the second write,
# the write must come in the form of an atomic add." `+=` reads the old value too, but its
# adjoint never needs that value. `*=` does. The docs' program, as Taichi runs it (no checks),
# with `kernel.grad()`:

# %%
import tinyad as ti

ti.init(check="off")
N = 16
x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)


@ti.kernel
def func_break_rule_2():
    loss[None] += x[1] ** 2
    # BAD: not an atomic add
    loss[None] *= x[2]


for i in range(N):
    x[i] = i
loss.grad[None] = 1
loss[None] = 2
func_break_rule_2()
func_break_rule_2.grad()
# loss = (2 + x1^2) * x2: d/dx1 = 2 x1 x2 = 4, d/dx2 = 2 + x1^2 = 3
print("x.grad[1] =", x.grad[1], " x.grad[2] =", x.grad[2], " (true: 4, 3)")

# %% [markdown]
# x.grad[2] comes out as the loss after the `*=` (6), not the value `*=` read (3): the adjoint
# of `loss *= x[2]` replays `loss[None]`, which the `*=` itself overwrote.
#
# ## What tinyad says

# %%
ti.init()
x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
for i in range(N):
    x[i] = i
loss.grad[None] = 1
loss[None] = 2
try:
    func_break_rule_2()
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# ## The fix
#
# Compute the final value in a local and store it once: the docs' `func_equivalent`. The
# starting value 2 lives in its own field, `base`, so that the loss is written once.

# %%
base = ti.field(dtype=ti.f32, shape=())


@ti.kernel
def func_equivalent():
    loss[None] = (base[None] + x[1] ** 2) * x[2]


base[None] = 2
ti.ad.clear_all_gradients()
loss.grad[None] = 1
func_equivalent()
func_equivalent.grad()
print("x.grad[1] =", x.grad[1], " x.grad[2] =", x.grad[2])
print(ti.ad.verify(func_equivalent, loss, [x]).render())
