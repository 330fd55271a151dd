"""benchmarks/gravity.py in Warp: U by one launch over (i, j) with wp.atomic_add, dU/dx by a
wp.Tape every step, as the tinyad module uses ti.ad.Tape(U).

`python -m benchmarks.peers.warp_gravity --n 1024 --steps 100` prints one JSON line.
"""
import numpy as np

from . import Workload, run


def build(wp, n, steps, dt=1e-5):
    @wp.kernel
    def compute_U(x: wp.array(dtype=wp.vec2), U: wp.array(dtype=float)):
        i, j = wp.tid()
        r = x[i] - x[j]
        wp.atomic_add(U, 0, -1.0 / wp.sqrt(wp.dot(r, r) + 1e-3))

    @wp.kernel
    def advance(x: wp.array(dtype=wp.vec2), v: wp.array(dtype=wp.vec2),
                force: wp.array(dtype=wp.vec2)):      # force: x.grad, dU/dx
        i = wp.tid()
        v[i] = v[i] - dt * force[i]
        x[i] = x[i] + dt * v[i]

    x = wp.zeros(n, dtype=wp.vec2, requires_grad=True)
    v = wp.zeros(n, dtype=wp.vec2)
    U = wp.zeros(1, dtype=float, requires_grad=True)

    def reset():
        x.assign(np.random.default_rng(0).random((n, 2)).astype(np.float32))
        v.zero_()

    def forward():
        for _ in range(steps):
            U.zero_()
            wp.launch(compute_U, dim=(n, n), inputs=[x, U])

    def taped_U():                     # U and x.grad = dU/dx, from zero as ti.ad.Tape starts
        U.zero_()
        x.grad.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(compute_U, dim=(n, n), inputs=[x, U])
        tape.backward(loss=U)

    def fwd_bwd():
        for _ in range(steps):
            taped_U()
            wp.launch(advance, dim=n, inputs=[x, v, x.grad])

    def result():                      # U and dU/dx at x0
        reset()
        taped_U()
        g = x.grad.numpy()[0]
        return float(U.numpy()[0]), {"x.grad[0][0]": float(g[0]), "x.grad[0][1]": float(g[1])}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, "warp", {"n": 1024, "steps": 100})
