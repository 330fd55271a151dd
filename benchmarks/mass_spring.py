"""2D mass-spring body with actuated springs (DiffTaichi mass_spring style), by ti.ad.Tape.

    NX x NY lattice of unit masses, spacing 0.05, lower-left at (0.1, 0.1), particle (i, j) is
    i * NY + j; springs to the neighbours (+1,0), (0,+1), (+1,+1), (+1,-1); rest length r_s
    spring s:  f = k (L - r_s (1 + amp_s sin(w t dt + phase_s))) d / L,  d = x_b - x_a
    ground y = 0.05: k_g pen up, friction -k_f pen v.x;  gravity g;  damping c
    v[t+1] = v[t] (1 - c dt) + dt f / m;  x[t+1] = x[t] + dt v[t+1]   (time-indexed fields)
    loss = |center of mass at step S - (0.6, 0.2)|;  gradient w.r.t. amp
    forward  = force.fill(0), com.fill(0), S x (spring_forces(t), advance(t)), center(),
               final_loss()
    fwd+bwd  = the same inside ti.ad.Tape(loss)
    rng = default_rng(0): phase = 2 pi rng.random(n_springs), amp = 0.2 rng.random(n_springs)

`python -m benchmarks.mass_spring --mode fast --nx 10 --ny 5 --steps 1024` prints one JSON line
(50 particles, 157 springs). With `--taichi` the same program runs under Taichi instead of tinyad.
"""
# no `from __future__ import annotations`: Taichi reads the kernels' `t: ti.i32` annotations
import math

import numpy as np

from .harness import Workload, run

DT, M, K, DAMPING, G = 1e-3, 1.0, 1e4, 0.5, 9.8
K_GROUND, K_FRICTION, GROUND_Y = 1e4, 5e3, 0.05
OMEGA, TARGET = 2 * math.pi * 2, (0.6, 0.2)


def lattice(nx, ny):
    """Particle positions (n, 2) and springs as (a, b) index pairs, in the order of the rule."""
    pos = np.array([(0.1 + 0.05 * i, 0.1 + 0.05 * j) for i in range(nx) for j in range(ny)])
    springs = [(i * ny + j, (i + di) * ny + j + dj)
               for i in range(nx) for j in range(ny)
               for di, dj in ((1, 0), (0, 1), (1, 1), (1, -1))
               if i + di < nx and 0 <= j + dj < ny]
    return pos.astype(np.float32), np.array(springs, dtype=np.int32)


def build(ti, nx, ny, steps):
    pos, springs = lattice(nx, ny)
    n, ns = len(pos), len(springs)
    x = ti.Vector.field(2, dtype=ti.f32, shape=(steps + 1, n), needs_grad=True)
    v = ti.Vector.field(2, dtype=ti.f32, shape=(steps + 1, n), needs_grad=True)
    force = ti.Vector.field(2, dtype=ti.f32, shape=(steps, n), needs_grad=True)
    spring_a, spring_b = ti.field(ti.i32, shape=ns), ti.field(ti.i32, shape=ns)
    rest, phase = ti.field(ti.f32, shape=ns), ti.field(ti.f32, shape=ns)
    amp = ti.field(ti.f32, shape=ns, needs_grad=True)
    com = ti.Vector.field(2, dtype=ti.f32, shape=(), needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def spring_forces(t: ti.i32):
        for s in range(ns):
            a, b = spring_a[s], spring_b[s]
            d = x[t, b] - x[t, a]
            length = d.norm()
            actuated = rest[s] * (1 + amp[s] * ti.sin(OMEGA * t * DT + phase[s]))
            f = K * (length - actuated) * d / length
            force[t, a] += f
            force[t, b] -= f

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(n):
            pen = ti.max(GROUND_Y - x[t, i][1], 0.0)
            ground = ti.Vector([-K_FRICTION * pen * v[t, i][0], K_GROUND * pen - M * G])
            v[t + 1, i] = v[t, i] * (1 - DAMPING * DT) + DT * (force[t, i] + ground) / M
            x[t + 1, i] = x[t, i] + DT * v[t + 1, i]

    @ti.kernel
    def center():
        for i in range(n):
            com[None] += x[steps, i] / n

    @ti.kernel
    def final_loss():
        loss[None] = (com[None] - ti.Vector(TARGET)).norm()

    def reset():
        rng = np.random.default_rng(0)
        phase.from_numpy((2 * np.pi * rng.random(ns)).astype(np.float32))
        amp.from_numpy((0.2 * rng.random(ns)).astype(np.float32))
        spring_a.from_numpy(springs[:, 0])
        spring_b.from_numpy(springs[:, 1])
        rest.from_numpy(np.linalg.norm(pos[springs[:, 1]] - pos[springs[:, 0]], axis=1))
        x0 = np.zeros((steps + 1, n, 2), dtype=np.float32)
        x0[0] = pos
        x.from_numpy(x0)
        v.fill(0)

    def forward():
        force.fill(0)
        com.fill(0)
        for t in range(steps):
            spring_forces(t)
            advance(t)
        center()
        final_loss()

    def fwd_bwd():
        with ti.ad.Tape(loss=loss):
            forward()

    def result():
        return loss[None], {f"amp.grad[{s}]": amp.grad[s] for s in (0, 78) if s < ns}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, {"nx": 10, "ny": 5, "steps": 1024})
