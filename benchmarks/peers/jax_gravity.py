"""benchmarks/gravity.py in JAX: U(x) by jnp, forces by jax.grad(U), the steps by lax.scan.

`python -m benchmarks.peers.jax_gravity --n 1024 --steps 100` prints one JSON line.
"""
import numpy as np

from . import Workload, run


def build(jax, n, steps, dt=1e-5):
    jnp = jax.numpy

    def energy(x):                     # sum_{i,j} -1 / sqrt(|x_i - x_j|^2 + 1e-3)
        r = x[:, None, :] - x[None, :, :]
        return jnp.sum(-1 / jnp.sqrt(jnp.sum(r * r, axis=-1) + 1e-3))

    energy_jit = jax.jit(energy)
    energy_and_grad = jax.jit(jax.value_and_grad(energy))

    @jax.jit
    def simulate(x, v):
        def step(state, _):
            x, v = state
            v = v - dt * jax.grad(energy)(x)
            return (x + dt * v, v), None
        return jax.lax.scan(step, (x, v), None, length=steps)[0]

    state = {}

    def reset():
        state["x"] = jnp.asarray(np.random.default_rng(0).random((n, 2)).astype(np.float32))
        state["v"] = jnp.zeros((n, 2), jnp.float32)

    def forward():                     # S evaluations of U, as the tinyad module launches them
        for _ in range(steps):
            u = energy_jit(state["x"])
        u.block_until_ready()

    def fwd_bwd():
        jax.block_until_ready(simulate(state["x"], state["v"]))

    def result():                      # U and dU/dx at x0
        reset()
        u, g = energy_and_grad(state["x"])
        return float(u), {"x.grad[0][0]": float(g[0, 0]), "x.grad[0][1]": float(g[0, 1])}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, "jax", {"n": 1024, "steps": 100})
