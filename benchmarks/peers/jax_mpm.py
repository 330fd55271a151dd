"""benchmarks/mpm.py in JAX: each step's P2G as one scatter-add, grid update, G2P as one gather,
the steps by lax.scan, jax.grad w.r.t. (init_v, E) (JAX keeps every step's residuals: no
recomputation by hand).

`python -m benchmarks.peers.jax_mpm --n 8192 --grid 128 --steps 64` prints one JSON line.
"""
import numpy as np

from . import Workload, run

# the 3 x 3 stencil's offsets, i major as in the tinyad module's ti.static loops
OFFSETS = np.array([(i, j) for i in range(3) for j in range(3)], np.int32)


def build(jax, n, grid, steps, dt=4e-4, nu=0.2, gravity=9.8, bound=3):
    jnp = jax.numpy
    n_grid = grid
    dx, inv_dx = 1 / n_grid, float(n_grid)
    p_vol = 0.08 / n
    p_mass = p_vol
    eye = jnp.eye(2, dtype=jnp.float32)
    offsets = jnp.asarray(OFFSETS)
    node_i, node_j = (a.reshape(-1) for a in jnp.meshgrid(jnp.arange(n_grid), jnp.arange(n_grid),
                                                         indexing="ij"))
    x0 = jnp.asarray((np.array((0.2, 0.05)) + np.array((0.4, 0.2))
                      * np.random.default_rng(0).random((n, 2))).astype(np.float32))

    def polar_rotation(A):             # Taichi's closed form for 2 x 2: rotate by atan2(y, x)
        x, y = A[:, 0, 0] + A[:, 1, 1], A[:, 1, 0] - A[:, 0, 1]
        scale = 1 / jnp.sqrt(x * x + y * y)
        c, s = x * scale, y * scale
        return jnp.stack([jnp.stack([c, -s], -1), jnp.stack([s, c], -1)], -2)

    def stencil(x):
        """Per particle: fx, the 9 nodes' flat indices, weights and offsets (n, 9, ...)."""
        base = (x * inv_dx - 0.5).astype(jnp.int32)
        fx = x * inv_dx - base.astype(jnp.float32)
        w = jnp.stack([0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2])
        node = base[:, None, :] + offsets[None]
        index = node[..., 0] * n_grid + node[..., 1]
        weight = w[offsets[:, 0], :, 0].T * w[offsets[:, 1], :, 1].T
        dpos = offsets[None].astype(jnp.float32) - fx[:, None, :]       # in cells
        return index, weight, dpos

    def step(E, state):
        x, v, C, F = state
        index, weight, dpos = stencil(x)
        new_F = (eye + dt * C) @ F
        J = new_F[:, 0, 0] * new_F[:, 1, 1] - new_F[:, 0, 1] * new_F[:, 1, 0]
        mu, la = E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))
        tau = (2 * mu * (new_F - polar_rotation(new_F)) @ jnp.swapaxes(new_F, 1, 2)
               + eye * (la * J * (J - 1))[:, None, None])
        affine = -(dt * p_vol * 4 * inv_dx * inv_dx) * tau + p_mass * C
        momentum = weight[..., None] * (p_mass * v[:, None, :]
                                        + jnp.einsum("pab,pkb->pka", affine, dpos * dx))
        grid_v = jnp.zeros((n_grid * n_grid, 2), jnp.float32).at[index].add(momentum)
        grid_m = jnp.zeros(n_grid * n_grid, jnp.float32).at[index].add(weight * p_mass)

        vo = grid_v / (grid_m + 1e-10)[:, None]
        vx, vy = vo[:, 0], vo[:, 1] - dt * gravity
        vx = jnp.where(((node_i < bound) & (vx < 0)) | ((node_i > n_grid - bound) & (vx > 0)),
                       0.0, vx)
        vy = jnp.where(((node_j < bound) & (vy < 0)) | ((node_j > n_grid - bound) & (vy > 0)),
                       0.0, vy)
        grid_vo = jnp.stack([vx, vy], -1)

        g_v = grid_vo[index]                                           # (n, 9, 2)
        new_v = jnp.sum(weight[..., None] * g_v, axis=1)
        new_C = 4 * inv_dx * jnp.einsum("pk,pka,pkb->pab", weight, g_v, dpos)
        return x + dt * new_v, new_v, new_C, new_F

    def loss_fn(init_v, E):
        v0 = jnp.broadcast_to(init_v, (n, 2))
        C0, F0 = jnp.zeros((n, 2, 2), jnp.float32), jnp.broadcast_to(eye, (n, 2, 2))
        state, _ = jax.lax.scan(lambda s, _: (step(E, s), None), (x0, v0, C0, F0), None,
                                length=steps)
        xm = jnp.sum(state[0] / n, axis=0)
        return jnp.linalg.norm(xm - jnp.array([0.5, 0.2], jnp.float32))

    loss_jit = jax.jit(loss_fn)
    loss_and_grad = jax.jit(jax.value_and_grad(loss_fn, argnums=(0, 1)))
    state = {}

    def reset():
        state["init_v"], state["E"] = jnp.array([1.0, -2.0], jnp.float32), jnp.float32(50)

    def forward():
        state["loss"] = loss_jit(state["init_v"], state["E"]).block_until_ready()

    def fwd_bwd():
        state["loss"], state["grads"] = jax.block_until_ready(
            loss_and_grad(state["init_v"], state["E"]))

    def result():
        gv, gE = state["grads"]
        return float(state["loss"]), {"init_v.grad[0]": float(gv[0]),
                                      "init_v.grad[1]": float(gv[1]), "E.grad": float(gE)}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, "jax", {"n": 8192, "grid": 128, "steps": 64})
