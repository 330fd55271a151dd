"""Small differentiable 2D MLS-MPM (DiffTaichi diffmpm style), backward by kernel.grad() (no Tape).

    particles x, v, C, F time-indexed [t, p]; grid grid_v / grid_m / grid_vo reused every step
    fixed-corotated: tau = 2 mu (F - R) F^T + la J (J - 1) I,  R from ti.polar_decompose(F),
    quadratic B-spline, boundary: nodes within 3 cells of a wall lose the velocity into it
    step s:   clear_grid(); p2g(s); grid_op(); g2p(s)
    loss   =  |mean_p x[S, p] - (0.5, 0.2)|,  gradients w.r.t. init_v (all particles' v0) and E
    forward  = xm.fill(0), set_v(), S steps, mean_pos(), final_loss()
    fwd+bwd  = forward, then the grad kernels in reverse, recomputing each step's grid
    x0 = (0.2, 0.05) + (0.4, 0.2) * default_rng(0).random((n, 2)), init_v = (1, -2), E = 50,
    dt = 4e-4, dx = 1 / n_grid, p_vol = p_mass = 0.08 / n, gravity 9.8, nu = 0.2

`python -m benchmarks.mpm --mode fast --n 8192 --grid 128 --steps 64` prints one JSON line
(benchmarks/harness.py). With `--taichi` the same program runs under Taichi instead. Run twice
with the same fresh `TINYAD_CACHE_DIR` (Taichi: `TI_OFFLINE_CACHE_FILE_PATH`) for the cold and
the warm compile figures.
"""
# No `from __future__ import annotations`: Taichi reads the kernels' annotations (s: ti.i32).
import numpy as np

from .harness import Workload, run


def build(ti, n, grid, steps, dt=4e-4, nu=0.2, gravity=9.8, bound=3):
    n_grid = grid
    dx, inv_dx = 1 / n_grid, float(n_grid)
    p_vol = 0.08 / n
    p_mass = p_vol                                     # density 1
    particles, grid = (steps + 1, n), (n_grid, n_grid)   # one field a line: tinyad names it so
    x = ti.Vector.field(2, dtype=ti.f32, shape=particles, needs_grad=True)
    v = ti.Vector.field(2, dtype=ti.f32, shape=particles, needs_grad=True)
    C = ti.Matrix.field(2, 2, dtype=ti.f32, shape=particles, needs_grad=True)
    F = ti.Matrix.field(2, 2, dtype=ti.f32, shape=particles, needs_grad=True)
    grid_v = ti.Vector.field(2, dtype=ti.f32, shape=grid, needs_grad=True)
    grid_m = ti.field(dtype=ti.f32, shape=grid, needs_grad=True)
    grid_vo = ti.Vector.field(2, dtype=ti.f32, shape=grid, needs_grad=True)
    init_v = ti.Vector.field(2, dtype=ti.f32, shape=(), needs_grad=True)
    E = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    xm = ti.Vector.field(2, dtype=ti.f32, shape=(), needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def clear_grid():                      # the gradients too: the backward reuses the grid
        for i, j in grid_m:
            grid_v[i, j] = [0, 0]
            grid_m[i, j] = 0
            grid_v.grad[i, j] = [0, 0]
            grid_m.grad[i, j] = 0
            grid_vo.grad[i, j] = [0, 0]

    @ti.kernel
    def set_v():
        for p in range(n):
            v[0, p] = init_v[None]

    @ti.kernel
    def p2g(s: ti.i32):
        for p in range(n):
            base = ti.cast(x[s, p] * inv_dx - 0.5, ti.i32)
            fx = x[s, p] * inv_dx - ti.cast(base, ti.f32)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
            new_F = (ti.Matrix.identity(ti.f32, 2) + dt * C[s, p]) @ F[s, p]
            F[s + 1, p] = new_F
            J = new_F.determinant()
            r, _ = ti.polar_decompose(new_F)
            mu = E[None] / (2 * (1 + nu))
            la = E[None] * nu / ((1 + nu) * (1 - 2 * nu))
            tau = (2 * mu * (new_F - r) @ new_F.transpose()
                   + ti.Matrix.identity(ti.f32, 2) * la * J * (J - 1))
            affine = -(dt * p_vol * 4 * inv_dx * inv_dx) * tau + p_mass * C[s, p]
            for i in ti.static(range(3)):
                for j in ti.static(range(3)):
                    offset = ti.Vector([i, j])
                    dpos = (ti.cast(offset, ti.f32) - fx) * dx
                    weight = w[i][0] * w[j][1]
                    grid_v[base + offset] += weight * (p_mass * v[s, p] + affine @ dpos)
                    grid_m[base + offset] += weight * p_mass

    @ti.kernel
    def grid_op():
        for i, j in grid_m:
            vo = grid_v[i, j] / (grid_m[i, j] + 1e-10)
            vo[1] -= dt * gravity
            if i < bound and vo[0] < 0:
                vo[0] = 0
            if i > n_grid - bound and vo[0] > 0:
                vo[0] = 0
            if j < bound and vo[1] < 0:
                vo[1] = 0
            if j > n_grid - bound and vo[1] > 0:
                vo[1] = 0
            grid_vo[i, j] = vo

    @ti.kernel
    def g2p(s: ti.i32):
        for p in range(n):
            base = ti.cast(x[s, p] * inv_dx - 0.5, ti.i32)
            fx = x[s, p] * inv_dx - ti.cast(base, ti.f32)
            w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
            new_v = ti.Vector([0.0, 0.0])
            new_C = ti.Matrix([[0.0, 0.0], [0.0, 0.0]])
            for i in ti.static(range(3)):
                for j in ti.static(range(3)):
                    offset = ti.Vector([i, j])
                    dpos = ti.cast(offset, ti.f32) - fx          # in cells
                    g_v = grid_vo[base + offset]
                    weight = w[i][0] * w[j][1]
                    new_v += weight * g_v
                    new_C += 4 * inv_dx * weight * g_v.outer_product(dpos)
            v[s + 1, p] = new_v
            x[s + 1, p] = x[s, p] + dt * new_v
            C[s + 1, p] = new_C

    @ti.kernel
    def mean_pos():
        for p in range(n):
            xm[None] += x[steps, p] / n

    @ti.kernel
    def final_loss():
        loss[None] = (xm[None] - ti.Vector([0.5, 0.2])).norm()

    def reset():
        x0 = np.zeros((steps + 1, n, 2), np.float32)
        x0[0] = (0.2, 0.05) + (0.4, 0.2) * np.random.default_rng(0).random((n, 2))
        F0 = np.zeros((steps + 1, n, 2, 2), np.float32)
        F0[0] = np.eye(2)
        x.from_numpy(x0)
        F.from_numpy(F0)
        C.fill(0)
        init_v[None] = [1, -2]
        E[None] = 50

    def forward():
        xm.fill(0)
        set_v()
        for s in range(steps):
            clear_grid()
            p2g(s)
            grid_op()
            g2p(s)
        mean_pos()
        final_loss()

    def fwd_bwd():
        forward()
        ti.ad.clear_all_gradients()
        loss.grad[None] = 1
        final_loss.grad()
        mean_pos.grad()
        for s in reversed(range(steps)):               # the grid is not stored: recompute it
            clear_grid()
            p2g(s)
            grid_op()
            g2p.grad(s)
            grid_op.grad()
            p2g.grad(s)
        set_v.grad()

    def result():
        gv = init_v.grad[None]
        return float(loss[None]), {"init_v.grad[0]": float(gv[0]), "init_v.grad[1]": float(gv[1]),
                                   "E.grad": float(E.grad[None])}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, {"n": 8192, "grid": 128, "steps": 64})
