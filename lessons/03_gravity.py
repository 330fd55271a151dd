# %% [markdown]
# # Lesson 3: forces from energy (the gravity case study)
#
# In a simulation the energy is often easy to write and the force is not. Since the force is
# minus the gradient of the potential energy, F_i = -dU/dx_i, one kernel that computes U and a
# Tape give every force. This is Taichi's `ad_gravity` example, with 8 particles.

# %%
import numpy as np

import tinyad as ti

ti.init()
N = 8
dt = 1e-5
x = ti.Vector.field(2, dtype=ti.f32, shape=N, needs_grad=True)  # positions
v = ti.Vector.field(2, dtype=ti.f32, shape=N)                   # velocities
U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)           # energy


@ti.kernel
def compute_U():
    for i, j in ti.ndrange(N, N):
        r = x[i] - x[j]
        # r.norm(1e-3) is sqrt(|r|^2 + 1e-3): no 1/0 (and no NaN gradient) when i == j
        U[None] += -1 / r.norm(1e-3)


@ti.kernel
def advance():
    for i in x:
        v[i] += dt * -x.grad[i]  # dv/dt = -dU/dx
    for i in x:
        x[i] += dt * v[i]        # dx/dt = v


rng = np.random.default_rng(0)
x.from_numpy(rng.random((N, 2), dtype=np.float32))
with ti.ad.Tape(loss=U):
    compute_U()
print("U =", U[None])
print("force on particle 0 = -x.grad[0] =", -x.grad.to_numpy()[0])

# %% [markdown]
# ## Checking the forces by hand
#
# U sums -1/s_ij over every ordered pair, s_ij = sqrt(|x_i - x_j|^2 + 1e-3). Each pair appears
# twice (i, j and j, i), so dU/dx_i = 2 * sum_j (x_i - x_j) / s_ij^3. numpy computes that
# independently of tinyad:

# %%
positions = x.to_numpy().astype(np.float64)
diff = positions[:, None, :] - positions[None, :, :]
s = np.sqrt((diff ** 2).sum(axis=2) + 1e-3)
analytic_grad = 2 * (diff / s[:, :, None] ** 3).sum(axis=1)
largest_error = np.abs(x.grad.to_numpy() - analytic_grad).max()
worst = largest_error / np.abs(analytic_grad).max()
print("largest relative difference from the formula:", f"{worst:.1e}")

# %% [markdown]
# ## Stepping the simulation
#
# Each substep differentiates U afresh (the Tape clears the old gradients and sets U[None] to
# 0 on entry, so `+=` in compute_U starts from nothing; its loss must be a 0-D field) and
# moves the particles with the forces. `advance` runs outside the Tape: it only uses the
# gradient.

# %%
def substep():
    with ti.ad.Tape(loss=U):
        compute_U()
    advance()


for step in range(5):
    substep()
print("after 5 substeps: U =", U[None], " particle 0 at", x.to_numpy()[0])
