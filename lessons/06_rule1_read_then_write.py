# %% [markdown]
# # Lesson 6: Global Data Access Rule 1: read, then changed
#
# "Once you read an element in a field, the element cannot be mutated anymore." The adjoint
# replays the forward's reads from the fields as they are when it runs; a value changed after
# the read is replayed changed. The docs' own program breaks the rule. First as Taichi runs it,
# without checks (`check="off"`): a wrong gradient and no error.

# %%
import tinyad as ti

ti.init(check="off")
N = 16
x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
b = ti.field(dtype=ti.f32, shape=(), needs_grad=True)


@ti.kernel
def func_broke_rule_1():
    # BAD: reads b, then changes it
    loss[None] = x[1] * b[None]
    b[None] += 100


for i in range(N):
    x[i] = i
b[None] = 10
with ti.ad.Tape(loss):
    func_broke_rule_1()
print("x.grad[1] =", x.grad[1], "  (loss = x[1] * 10: the truth is 10)")

# %% [markdown]
# ## What tinyad says
#
# With the checks on (interp mode's default) the same launch stops at the write, naming the
# element, both lines, the value the adjoint would replay, and a fix.

# %%
ti.init()   # check="error", the default
x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
b = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
for i in range(N):
    x[i] = i
b[None] = 10
try:
    with ti.ad.Tape(loss):
        func_broke_rule_1()
except ti.ReadThenOverwriteRuleError as error:
    print(error)

# %% [markdown]
# `tinyad explain` shows the same from the IR alone: the adjoint replays `b[]`, and the next line
# writes it.

# %%
from tinyad.explain import explain

print(explain(func_broke_rule_1))

# %% [markdown]
# ## The fix
#
# Keep the value the adjoint needs: write the new b to another field (or update b in a kernel
# outside the Tape). Then `ti.ad.verify` compares the Tape's gradient with sympy's.

# %%
b_next = ti.field(dtype=ti.f32, shape=(), needs_grad=True)


@ti.kernel
def func_fixed():
    loss[None] = x[1] * b[None]
    b_next[None] = b[None] + 100


b[None] = 10
with ti.ad.Tape(loss):
    func_fixed()
print("x.grad[1] =", x.grad[1])
print(ti.ad.verify(func_fixed, loss, [x, b]).render())
