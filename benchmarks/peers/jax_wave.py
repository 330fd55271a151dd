"""benchmarks/wave.py in JAX: leapfrog steps by lax.scan over (p[t-1], p[t]), jax.grad w.r.t. init.

`python -m benchmarks.peers.jax_wave --n 128 --steps 256` prints one JSON line.
"""
from ..wave import C2, inputs
from . import Workload, run


def build(jax, n, steps):
    jnp = jax.numpy
    init0, target = (jnp.asarray(a) for a in inputs(n))

    def loss_fn(init):
        p0 = jnp.pad(init[1:-1, 1:-1], 1)          # the border of every p[t] stays 0

        def step(state, _):
            prev, cur = state
            lap = (cur[2:, 1:-1] + cur[:-2, 1:-1] + cur[1:-1, 2:] + cur[1:-1, :-2]
                   - 4 * cur[1:-1, 1:-1])
            nxt = jnp.pad(2 * cur[1:-1, 1:-1] - prev[1:-1, 1:-1] + C2 * lap, 1)
            return (cur, nxt), None

        (_, last), _ = jax.lax.scan(step, (p0, p0), None, length=steps)
        d = last - target
        return jnp.sum(d * d / (n * n))

    loss_jit = jax.jit(loss_fn)
    loss_and_grad = jax.jit(jax.value_and_grad(loss_fn))
    state = {}

    def reset():
        state["init"] = init0

    def forward():
        state["loss"] = loss_jit(state["init"]).block_until_ready()

    def fwd_bwd():
        state["loss"], state["grad"] = jax.block_until_ready(loss_and_grad(state["init"]))

    def result():
        c = n // 2
        return float(state["loss"]), {f"init.grad[{c},{c}]": float(state["grad"][c, c])}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, "jax", {"n": 128, "steps": 256})
