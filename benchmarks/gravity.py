"""N-body gravity driven by autodiff: forces are -dU/dx, by ti.ad.Tape(U).

    U = sum_{i,j} -1 / |x_i - x_j|,  |r| softened as r.norm(1e-3)
    one step:  with Tape(U): compute_U();  advance(): v -= dt * x.grad;  x += dt * v
    forward  = S x (U.fill(0); compute_U())
    fwd+bwd  = S x (Tape(U){compute_U()}; advance())
    x0 = default_rng(0).random((N, 2)) as float32, v0 = 0, dt = 1e-5
    loss and grads: U and dU/dx[0] at x0

`python -m benchmarks.gravity --mode fast --n 1024 --steps 100` prints one JSON line
(benchmarks/harness.py). With `--taichi` the same program runs under Taichi instead.
"""
import numpy as np

from .harness import Workload, run


def build(ti, n, steps, dt=1e-5):
    x = ti.Vector.field(2, dtype=ti.f32, shape=n, needs_grad=True)
    v = ti.Vector.field(2, dtype=ti.f32, shape=n)
    U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(n, n):
            r = x[i] - x[j]
            U[None] += -1 / r.norm(1e-3)

    @ti.kernel
    def advance():
        for i in x:
            v[i] -= dt * x.grad[i]
            x[i] += dt * v[i]

    def reset():
        x.from_numpy(np.random.default_rng(0).random((n, 2)).astype(np.float32))
        v.fill(0)

    def forward():
        for _ in range(steps):
            U.fill(0)
            compute_U()

    def fwd_bwd():
        for _ in range(steps):
            with ti.ad.Tape(loss=U):
                compute_U()
            advance()

    def result():                  # U and dU/dx at x0
        reset()
        with ti.ad.Tape(loss=U):
            compute_U()
        g = x.grad.to_numpy()[0]
        return U[None], {"x.grad[0][0]": g[0], "x.grad[0][1]": g[1]}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, {"n": 1024, "steps": 100})
