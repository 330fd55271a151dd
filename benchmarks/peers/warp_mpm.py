"""benchmarks/mpm.py in Warp: particles [t, p] and each step's grid [s, i, j] in time-indexed
arrays, so that one wp.Tape records the whole run and replays it backwards (a Tape must not
see an array overwritten; the tinyad module reuses one grid and recomputes it instead).

`python -m benchmarks.peers.warp_mpm --n 8192 --grid 128 --steps 64` prints one JSON line.
"""
import numpy as np

from . import Workload, run, warp_taped


def build(wp, n, grid, steps, dt=4e-4, nu=0.2, gravity=9.8, bound=3):
    n_grid = grid
    dx, inv_dx = 1 / n_grid, float(n_grid)
    p_vol = 0.08 / n
    p_mass = p_vol
    affine_scale = -(dt * p_vol * 4 * inv_dx * inv_dx)
    vec2s, mat22s = wp.array2d(dtype=wp.vec2), wp.array2d(dtype=wp.mat22)
    scalar = wp.array(dtype=float)

    @wp.func
    def bspline(f: float):             # the quadratic B-spline's weights of nodes 0, 1, 2
        return wp.vec3(0.5 * (1.5 - f) * (1.5 - f), 0.75 - (f - 1.0) * (f - 1.0),
                       0.5 * (f - 0.5) * (f - 0.5))

    @wp.func
    def polar_rotation(A: wp.mat22):   # Taichi's closed form for 2 x 2
        x, y = A[0, 0] + A[1, 1], A[1, 0] - A[0, 1]
        scale = 1.0 / wp.sqrt(x * x + y * y)
        c, s = x * scale, y * scale
        return wp.mat22(c, -s, s, c)

    @wp.kernel
    def set_v(init_v: wp.array(dtype=wp.vec2), v: vec2s):
        v[0, wp.tid()] = init_v[0]

    @wp.kernel
    def p2g(x: vec2s, v: vec2s, C: mat22s, F: mat22s, E: scalar, s: int,
            grid_v: wp.array3d(dtype=wp.vec2), grid_m: wp.array3d(dtype=float)):
        p = wp.tid()
        bx, by = int(x[s, p][0] * inv_dx - 0.5), int(x[s, p][1] * inv_dx - 0.5)
        fx = x[s, p] * inv_dx - wp.vec2(float(bx), float(by))
        wx, wy = bspline(fx[0]), bspline(fx[1])
        identity = wp.identity(n=2, dtype=float)
        new_F = (identity + dt * C[s, p]) @ F[s, p]
        F[s + 1, p] = new_F
        J = wp.determinant(new_F)
        mu = E[0] / (2.0 * (1.0 + nu))
        la = E[0] * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
        tau = (2.0 * mu * (new_F - polar_rotation(new_F)) @ wp.transpose(new_F)
               + identity * (la * J * (J - 1.0)))
        affine = affine_scale * tau + p_mass * C[s, p]
        for i in range(3):
            for j in range(3):
                dpos = (wp.vec2(float(i), float(j)) - fx) * dx
                weight = wx[i] * wy[j]
                momentum = weight * (p_mass * v[s, p] + affine @ dpos)
                wp.atomic_add(grid_v, s, bx + i, by + j, momentum)
                wp.atomic_add(grid_m, s, bx + i, by + j, weight * p_mass)

    @wp.kernel
    def grid_op(grid_v: wp.array3d(dtype=wp.vec2), grid_m: wp.array3d(dtype=float), s: int,
                grid_vo: wp.array3d(dtype=wp.vec2)):
        i, j = wp.tid()
        vo = grid_v[s, i, j] / (grid_m[s, i, j] + 1e-10)
        vx, vy = vo[0], vo[1] - dt * gravity
        if (i < bound and vx < 0.0) or (i > n_grid - bound and vx > 0.0):
            vx = 0.0
        if (j < bound and vy < 0.0) or (j > n_grid - bound and vy > 0.0):
            vy = 0.0
        grid_vo[s, i, j] = wp.vec2(vx, vy)

    @wp.kernel
    def g2p(x: vec2s, v: vec2s, C: mat22s, grid_vo: wp.array3d(dtype=wp.vec2), s: int):
        p = wp.tid()
        bx, by = int(x[s, p][0] * inv_dx - 0.5), int(x[s, p][1] * inv_dx - 0.5)
        fx = x[s, p] * inv_dx - wp.vec2(float(bx), float(by))
        wx, wy = bspline(fx[0]), bspline(fx[1])
        new_v = wp.vec2(0.0, 0.0)
        new_C = wp.mat22(0.0, 0.0, 0.0, 0.0)
        for i in range(3):
            for j in range(3):
                dpos = wp.vec2(float(i), float(j)) - fx            # in cells
                g_v = grid_vo[s, bx + i, by + j]
                weight = wx[i] * wy[j]
                new_v = new_v + weight * g_v
                new_C = new_C + 4.0 * inv_dx * weight * wp.outer(g_v, dpos)
        v[s + 1, p] = new_v
        x[s + 1, p] = x[s, p] + dt * new_v
        C[s + 1, p] = new_C

    @wp.kernel
    def mean_pos(x: vec2s, xm: wp.array(dtype=wp.vec2)):
        wp.atomic_add(xm, 0, x[steps, wp.tid()] / float(n))

    @wp.kernel
    def final_loss(xm: wp.array(dtype=wp.vec2), loss: scalar):
        loss[0] = wp.length(xm[0] - wp.vec2(0.5, 0.2))

    particles, grids = (steps + 1, n), (steps, n_grid, n_grid)
    x = wp.zeros(particles, dtype=wp.vec2, requires_grad=True)
    v = wp.zeros(particles, dtype=wp.vec2, requires_grad=True)
    C = wp.zeros(particles, dtype=wp.mat22, requires_grad=True)
    F = wp.zeros(particles, dtype=wp.mat22, requires_grad=True)
    grid_v = wp.zeros(grids, dtype=wp.vec2, requires_grad=True)
    grid_m = wp.zeros(grids, dtype=float, requires_grad=True)
    grid_vo = wp.zeros(grids, dtype=wp.vec2, requires_grad=True)
    init_v = wp.zeros(1, dtype=wp.vec2, requires_grad=True)
    E = wp.zeros(1, dtype=float, requires_grad=True)
    xm = wp.zeros(1, dtype=wp.vec2, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    arrays = (x, v, C, F, grid_v, grid_m, grid_vo, init_v, E, xm, loss)

    def reset():
        x0 = np.zeros((steps + 1, n, 2), np.float32)
        x0[0] = (0.2, 0.05) + (0.4, 0.2) * np.random.default_rng(0).random((n, 2))
        F0 = np.zeros((steps + 1, n, 2, 2), np.float32)
        F0[0] = np.eye(2)
        x.assign(x0)
        F.assign(F0)
        C.zero_()
        init_v.assign(np.array([[1, -2]], np.float32))
        E.assign(np.array([50], np.float32))

    def forward():
        xm.zero_()
        grid_v.zero_()
        grid_m.zero_()
        wp.launch(set_v, dim=n, inputs=[init_v, v])
        for s in range(steps):
            wp.launch(p2g, dim=n, inputs=[x, v, C, F, E, s, grid_v, grid_m])
            wp.launch(grid_op, dim=(n_grid, n_grid), inputs=[grid_v, grid_m, s, grid_vo])
            wp.launch(g2p, dim=n, inputs=[x, v, C, grid_vo, s])
        wp.launch(mean_pos, dim=n, inputs=[x, xm])
        wp.launch(final_loss, dim=1, inputs=[xm, loss])

    def fwd_bwd():
        warp_taped(wp, arrays, forward, loss)

    def result():
        gv = init_v.grad.numpy()[0]
        return float(loss.numpy()[0]), {"init_v.grad[0]": float(gv[0]),
                                        "init_v.grad[1]": float(gv[1]),
                                        "E.grad": float(E.grad.numpy()[0])}

    return Workload(reset, forward, fwd_bwd, result)


if __name__ == "__main__":
    run(build, "warp", {"n": 8192, "grid": 128, "steps": 64})
