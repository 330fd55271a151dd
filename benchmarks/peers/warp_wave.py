"""benchmarks/wave.py in Warp: p[t] time-indexed in one 3D array, a launch per step, one wp.Tape.

`python -m benchmarks.peers.warp_wave --n 128 --steps 256` prints one JSON line.
"""
from ..wave import C2, inputs
from . import Workload, run, warp_taped


def build(wp, n, steps):
    @wp.kernel
    def initialize(init: wp.array2d(dtype=float), p: wp.array3d(dtype=float)):
        i, j = wp.tid()                # the interior only: the border of every p[t] stays 0
        p[0, i + 1, j + 1] = init[i + 1, j + 1]
        p[1, i + 1, j + 1] = init[i + 1, j + 1]

    @wp.kernel
    def step(p: wp.array3d(dtype=float), t: int):
        i0, j0 = wp.tid()
        i, j = i0 + 1, j0 + 1
        lap = p[t, i + 1, j] + p[t, i - 1, j] + p[t, i, j + 1] + p[t, i, j - 1] - 4.0 * p[t, i, j]
        p[t + 1, i, j] = 2.0 * p[t, i, j] - p[t - 1, i, j] + C2 * lap

    @wp.kernel
    def compute_loss(p: wp.array3d(dtype=float), target: wp.array2d(dtype=float),
                     loss: wp.array(dtype=float)):
        i, j = wp.tid()
        d = p[steps + 1, i, j] - target[i, j]
        wp.atomic_add(loss, 0, d * d / float(n * n))

    p = wp.zeros((steps + 2, n, n), dtype=float, requires_grad=True)
    init = wp.zeros((n, n), dtype=float, requires_grad=True)
    target = wp.zeros((n, n), dtype=float)
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    def reset():
        a, b = inputs(n)
        init.assign(a)
        target.assign(b)

    def run_steps():
        wp.launch(initialize, dim=(n - 2, n - 2), inputs=[init, p])
        for t in range(1, steps + 1):
            wp.launch(step, dim=(n - 2, n - 2), inputs=[p, t])
        wp.launch(compute_loss, dim=(n, n), inputs=[p, target, loss])

    def forward():
        loss.zero_()
        run_steps()

    def fwd_bwd():
        loss.zero_()
        warp_taped(wp, (p, init, loss), run_steps, loss)

    def result():
        c = n // 2
        return float(loss.numpy()[0]), {f"init.grad[{c},{c}]": float(init.grad.numpy()[c, c])}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, "warp", {"n": 128, "steps": 256})
