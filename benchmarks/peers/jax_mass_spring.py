"""benchmarks/mass_spring.py in JAX: the trajectory by lax.scan, d loss / d amp by jax.grad.

`python -m benchmarks.peers.jax_mass_spring --nx 10 --ny 5 --steps 1024` prints one JSON line.
"""
import numpy as np

from ..mass_spring import (
    DAMPING,
    DT,
    GROUND_Y,
    K_FRICTION,
    K_GROUND,
    OMEGA,
    TARGET,
    G,
    K,
    M,
    lattice,
)
from . import Workload, run


def build(jax, nx, ny, steps):
    jnp = jax.numpy
    pos, springs = lattice(nx, ny)
    n, ns = len(pos), len(springs)
    a, b = jnp.asarray(springs[:, 0]), jnp.asarray(springs[:, 1])
    rest = jnp.asarray(np.linalg.norm(pos[springs[:, 1]] - pos[springs[:, 0]], axis=1))
    rng = np.random.default_rng(0)
    phase = jnp.asarray((2 * np.pi * rng.random(ns)).astype(np.float32))
    amp0 = jnp.asarray((0.2 * rng.random(ns)).astype(np.float32))

    def loss_fn(amp):
        def step(state, t):
            x, v = state
            d = x[b] - x[a]
            length = jnp.sqrt(jnp.sum(d * d, axis=1))[:, None]
            actuated = (rest * (1 + amp * jnp.sin(OMEGA * t * DT + phase)))[:, None]
            f = K * (length - actuated) * d / length
            force = jnp.zeros_like(x).at[a].add(f).at[b].add(-f)
            pen = jnp.maximum(GROUND_Y - x[:, 1], 0.0)
            ground = jnp.stack([-K_FRICTION * pen * v[:, 0], K_GROUND * pen - M * G], axis=1)
            v = v * (1 - DAMPING * DT) + DT * (force + ground) / M
            return (x + DT * v, v), None

        x0, v0 = jnp.asarray(pos), jnp.zeros((n, 2), jnp.float32)
        (x, _), _ = jax.lax.scan(step, (x0, v0), jnp.arange(steps))
        com = jnp.sum(x / n, axis=0)
        return jnp.linalg.norm(com - jnp.asarray(TARGET, jnp.float32))

    loss_jit = jax.jit(loss_fn)
    loss_and_grad = jax.jit(jax.value_and_grad(loss_fn))
    state = {}

    def reset():
        state["amp"] = amp0

    def forward():
        state["loss"] = loss_jit(state["amp"]).block_until_ready()

    def fwd_bwd():
        state["loss"], state["grad"] = jax.block_until_ready(loss_and_grad(state["amp"]))

    def result():
        return float(state["loss"]), {f"amp.grad[{s}]": float(state["grad"][s])
                                      for s in (0, 78) if s < ns}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, "jax", {"nx": 10, "ny": 5, "steps": 1024})
