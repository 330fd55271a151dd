"""2D scalar wave equation (DiffTaichi wave style), reverse mode via ti.ad.Tape.

    n x n grid, dx = 1/n, C2 = (c dt / dx)^2 = 0.25, border held at 0 (Dirichlet)
    p[0] = p[1] = init on the interior;  for t = 1 .. S:
      p[t+1] = 2 p[t] - p[t-1] + C2 * (p[t,i+1,j] + p[t,i-1,j] + p[t,i,j+1] + p[t,i,j-1] - 4 p[t])
    loss = sum_ij (p[S+1] - target)^2 / n^2;  gradient w.r.t. init
    forward  = loss.fill(0), initialize(), S x step(t), compute_loss()
    fwd+bwd  = the same inside ti.ad.Tape(loss)
    init = gaussian at (0.5, 0.5) + 0.01 default_rng(0).standard_normal((n, n)),
    target = 0.5 gaussian at (0.3, 0.6), sigma 0.05 (both float32)

`python -m benchmarks.wave --mode fast --n 128 --steps 256` prints one JSON line
(benchmarks/harness.py). With
`--taichi` the same program runs under Taichi (if importable) instead of tinyad.
"""
# no `from __future__ import annotations`: Taichi reads the kernels' `t: ti.i32` annotations
import numpy as np

from .harness import Workload, run

C2 = 0.25


def inputs(n):
    u = (np.arange(n) + 0.5) / n
    uu, ww = np.meshgrid(u, u, indexing="ij")
    bump = lambda cu, cw: np.exp(-((uu - cu) ** 2 + (ww - cw) ** 2) / (2 * 0.05 ** 2))
    init = bump(0.5, 0.5) + 0.01 * np.random.default_rng(0).standard_normal((n, n))
    return init.astype(np.float32), (0.5 * bump(0.3, 0.6)).astype(np.float32)


def build(ti, n, steps):
    p = ti.field(dtype=ti.f32, shape=(steps + 2, n, n), needs_grad=True)
    init = ti.field(dtype=ti.f32, shape=(n, n), needs_grad=True)
    target = ti.field(dtype=ti.f32, shape=(n, n))
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def initialize():             # the interior only: the border of every p[t] stays 0
        for i, j in ti.ndrange((1, n - 1), (1, n - 1)):
            p[0, i, j] = init[i, j]
            p[1, i, j] = init[i, j]

    @ti.kernel
    def step(t: ti.i32):
        for i, j in ti.ndrange((1, n - 1), (1, n - 1)):
            lap = p[t, i + 1, j] + p[t, i - 1, j] + p[t, i, j + 1] + p[t, i, j - 1] - 4 * p[t, i, j]
            p[t + 1, i, j] = 2 * p[t, i, j] - p[t - 1, i, j] + C2 * lap

    @ti.kernel
    def compute_loss():
        for i, j in target:
            d = p[steps + 1, i, j] - target[i, j]
            loss[None] += d * d / (n * n)

    def reset():
        a, b = inputs(n)
        init.from_numpy(a)
        target.from_numpy(b)

    def run():
        initialize()
        for t in range(1, steps + 1):
            step(t)
        compute_loss()

    def forward():
        loss.fill(0)
        run()

    def fwd_bwd():
        loss.fill(0)               # outside the Tape: Taichi cannot differentiate a scalar fill
        with ti.ad.Tape(loss=loss):
            run()

    def result():
        c = n // 2
        return loss[None], {f"init.grad[{c},{c}]": init.grad[c, c]}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, {"n": 128, "steps": 256})
