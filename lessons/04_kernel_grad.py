# %% [markdown]
# # Lesson 4: kernel.grad() for several outputs
#
# A Tape follows one 0-D loss. When a kernel has several outputs whose gradients should flow
# back together, call the adjoint kernel yourself: seed each output's `.grad` with the weight
# you want (1 here), run the forward kernel, then `kernel.grad()`. This is the docs' example.

# %%
import tinyad as ti

ti.init()
N = 16
x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
loss2 = ti.field(dtype=ti.f32, shape=(), needs_grad=True)


@ti.kernel
def func():
    for i in x:
        loss[None] += x[i] ** 2
        loss2[None] += x[i]


for i in range(N):
    x[i] = i
loss.grad[None] = 1
loss2.grad[None] = 1

func()
func.grad()
print("x.grad =", x.grad.to_numpy())
print("dx_i == 2 i + 1:", all(x.grad[i] == 2 * i + 1 for i in range(N)))

# %% [markdown]
# ## Gradients accumulate
#
# Nothing clears `.grad` between manual calls (a Tape clears every gradient on entry). Calling
# `func.grad()` again adds the same gradient once more: tinyad warns, since that is rarely
# meant. `ti.ad.clear_all_gradients()` starts afresh (and the outputs must be seeded again).

# %%
func.grad()
print("after a second func.grad(): x.grad[3] =", x.grad[3], "(2 * 7)")
ti.ad.clear_all_gradients()
loss.grad[None] = 1
loss2.grad[None] = 1
func.grad()
print("cleared and seeded again:   x.grad[3] =", x.grad[3])

# %% [markdown]
# ## Run the forward kernel first
#
# The adjoint recomputes what it needs from the fields as they are when it runs. The docs
# advise always calling `kernel()` before `kernel.grad()`: if the forward changes a field the
# gradient depends on, an adjoint run without it reads the wrong values (Global Data Access
# Rule 1, lessons 6 and 7). The adjoint of `func` replays the reads of `x`:

# %%
from tinyad.explain import replay_notes

print(replay_notes(func))
