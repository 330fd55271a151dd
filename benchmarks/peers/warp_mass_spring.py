"""benchmarks/mass_spring.py in Warp: time-indexed 2D arrays [t, i], two launches per step, one
wp.Tape over the trajectory, d loss / d amp from amp.grad.

`python -m benchmarks.peers.warp_mass_spring --nx 10 --ny 5 --steps 1024` prints one JSON line.
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
from . import Workload, run, warp_taped


def build(wp, nx, ny, steps):
    pos, springs = lattice(nx, ny)
    n, ns = len(pos), len(springs)
    vec2s = wp.array2d(dtype=wp.vec2)
    target = wp.vec2(*TARGET)
    floats = wp.array(dtype=float)

    @wp.kernel
    def spring_forces(x: vec2s, spring_a: wp.array(dtype=int), spring_b: wp.array(dtype=int),
                      rest: floats, phase: floats, amp: floats, t: int, force: vec2s):
        s = wp.tid()
        a, b = spring_a[s], spring_b[s]
        d = x[t, b] - x[t, a]
        length = wp.length(d)
        actuated = rest[s] * (1.0 + amp[s] * wp.sin(OMEGA * float(t) * DT + phase[s]))
        f = K * (length - actuated) * d / length
        wp.atomic_add(force, t, a, f)
        wp.atomic_sub(force, t, b, f)

    @wp.kernel
    def advance(x: vec2s, v: vec2s, force: vec2s, t: int):
        i = wp.tid()
        pen = wp.max(GROUND_Y - x[t, i][1], 0.0)
        ground = wp.vec2(-K_FRICTION * pen * v[t, i][0], K_GROUND * pen - M * G)
        v[t + 1, i] = v[t, i] * (1.0 - DAMPING * DT) + DT * (force[t, i] + ground) / M
        x[t + 1, i] = x[t, i] + DT * v[t + 1, i]

    @wp.kernel
    def center(x: vec2s, com: wp.array(dtype=wp.vec2)):
        i = wp.tid()
        wp.atomic_add(com, 0, x[steps, i] / float(n))

    @wp.kernel
    def final_loss(com: wp.array(dtype=wp.vec2), loss: floats):
        loss[0] = wp.length(com[0] - target)

    x = wp.zeros((steps + 1, n), dtype=wp.vec2, requires_grad=True)
    v = wp.zeros((steps + 1, n), dtype=wp.vec2, requires_grad=True)
    force = wp.zeros((steps, n), dtype=wp.vec2, requires_grad=True)
    spring_a, spring_b = wp.array(springs[:, 0]), wp.array(springs[:, 1])
    rest = wp.array(np.linalg.norm(pos[springs[:, 1]] - pos[springs[:, 0]], axis=1), dtype=float)
    phase = wp.zeros(ns, dtype=float)
    amp = wp.zeros(ns, dtype=float, requires_grad=True)
    com = wp.zeros(1, dtype=wp.vec2, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    def reset():
        rng = np.random.default_rng(0)
        phase.assign((2 * np.pi * rng.random(ns)).astype(np.float32))
        amp.assign((0.2 * rng.random(ns)).astype(np.float32))
        x0 = np.zeros((steps + 1, n, 2), dtype=np.float32)
        x0[0] = pos
        x.assign(x0)
        v.zero_()

    def forward():
        force.zero_()
        com.zero_()
        for t in range(steps):
            wp.launch(spring_forces, dim=ns,
                      inputs=[x, spring_a, spring_b, rest, phase, amp, t, force])
            wp.launch(advance, dim=n, inputs=[x, v, force, t])
        wp.launch(center, dim=n, inputs=[x, com])
        wp.launch(final_loss, dim=1, inputs=[com, loss])

    def fwd_bwd():
        warp_taped(wp, (x, v, force, amp, com, loss), forward, loss)

    def result():
        g = amp.grad.numpy()
        return float(loss.numpy()[0]), {f"amp.grad[{s}]": float(g[s]) for s in (0, 78) if s < ns}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, "warp", {"nx": 10, "ny": 5, "steps": 1024})
