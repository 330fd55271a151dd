# %% [markdown]
# # Lesson 2: why gradients go silently wrong, and how tinyad catches it
#
# The adjoint kernel *recomputes* what it needs from the fields as they are when it runs
# (lesson 1). So a gradient is right only if every value the adjoint replays is still the
# value the forward read. Taichi states this as its Global Data Access Rules, and says that
# breaking them "might result in incorrect gradient result without a proper error".
# tinyad logs every access per element and names the element, both lines and a fix.

# %%
import tinyad as ti

ti.init(check="warn")   # report and go on, so we can see the wrong result too
x = ti.field(ti.f32, shape=4, needs_grad=True)
b = ti.field(ti.f32, shape=(), needs_grad=True)
loss = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def broken():
    loss[None] = x[1] * b[None]
    b[None] += 100


x[1], b[None] = 1.0, 10.0
with ti.ad.Tape(loss=loss):
    broken()
print("x.grad[1] =", x.grad[1], "but the true gradient is 10: the adjoint saw b = 110")

# %% [markdown]
# The fix the report suggests: keep the old value, e.g. in a separate field.

# %%
b_next = ti.field(ti.f32, shape=(), needs_grad=True)


@ti.kernel
def fixed():
    loss[None] = x[1] * b[None]
    b_next[None] = b[None] + 100


b[None] = 10.0
with ti.ad.Tape(loss=loss):
    fixed()
print("x.grad[1] =", x.grad[1])

# %% [markdown]
# ## Iterations of a parallel loop that depend on each other
#
# The outermost loop runs its iterations in any order, forward and backward. A recurrence
# through a field is a race; Taichi differentiates it silently to a wrong value.

# %%
f = ti.field(ti.f32, shape=9, needs_grad=True)
th = ti.field(ti.f32, shape=(), needs_grad=True)
th[None] = 1.0


@ti.kernel
def recurrence():
    for i in range(8):
        f[i + 1] = f[i] * 0.5 + th[None]


@ti.kernel
def last():
    loss[None] = f[8]


with ti.ad.Tape(loss=loss):
    recurrence()
    last()
print("th.grad =", th.grad[None], "but the true gradient is 2 * (1 - 0.5**8) = 1.992")

# %% [markdown]
# Run in order (`ti.loop_config(serialize=True)`), the same recurrence is differentiated
# right: a serial loop's adjoint runs its iterations backwards.

# %%
@ti.kernel
def recurrence_in_order():
    ti.loop_config(serialize=True)
    for i in range(8):
        f[i + 1] = f[i] * 0.5 + th[None]


f.fill(0)
with ti.ad.Tape(loss=loss):
    recurrence_in_order()
    last()
print("th.grad =", th.grad[None])
