"""A small differentiable MPM: throw a blob of fluid so that it lands on a target, by Tape.

MLS-MPM (Taichi's mpm88 fluid: the pressure from each particle's volume ratio J) on a 12 x 12
grid. Each step scatters the particles to the grid (p2g), applies gravity and the walls
(grid_op) and gathers back (g2p). The loss is the squared distance of the blob's centre after
the last step from a target; gradient descent on the initial velocity (normalised steps) lowers
it. Particles and grid are indexed by step (x[s, p], grid_v[s, i, j]) so that a Tape can replay
every step; DiffTaichi's diffmpm instead reuses one grid and recomputes it going backwards
(lesson 11).

Run it:  tinyad example mpm [--rounds N] [--steps S] [--plot out.png]
"""
import numpy as np

import tinyad as ti
from tinyad.examples._show import LossBar, parser, save_png

GRID, DT, STIFFNESS, GRAVITY, BOUND = 12, 1e-3, 400.0, 9.8, 2
DX = 1 / GRID
TARGET = (0.31, 0.35)


class Blob:
    def __init__(self, steps: int, side: int = 4):
        self.steps, self.n = steps, side * side
        n = self.n
        p_vol = (DX * 0.5) ** 2
        p_mass = p_vol                  # density 1
        x = ti.Vector.field(2, ti.f64, shape=(steps + 1, n), needs_grad=True)
        v = ti.Vector.field(2, ti.f64, shape=(steps + 1, n), needs_grad=True)
        C = ti.Matrix.field(2, 2, ti.f64, shape=(steps + 1, n), needs_grad=True)
        J = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
        grid_v = ti.Vector.field(2, ti.f64, shape=(steps, GRID, GRID), needs_grad=True)
        grid_m = ti.field(ti.f64, shape=(steps, GRID, GRID), needs_grad=True)
        grid_vo = ti.Vector.field(2, ti.f64, shape=(steps, GRID, GRID), needs_grad=True)
        init_v = ti.Vector.field(2, ti.f64, shape=(), needs_grad=True)
        centre = ti.Vector.field(2, ti.f64, shape=(), needs_grad=True)
        loss = ti.field(ti.f64, shape=(), needs_grad=True)
        self.x, self.init_v, self.loss = x, init_v, loss

        block = (np.stack(np.meshgrid(np.arange(side), np.arange(side)), -1).reshape(-1, 2)
                 + 0.5) * DX * 0.5 + (0.2, 0.25)
        start = np.zeros((steps + 1, n, 2))
        start[0] = block
        x.from_numpy(start)
        J.from_numpy(np.ones((steps + 1, n)))

        @ti.kernel
        def launch():               # also zeroes what the steps accumulate into
            for s, i, j in grid_m:
                grid_v[s, i, j] = ti.Vector([0.0, 0.0])
                grid_m[s, i, j] = 0.0
            for p in range(n):
                v[0, p] = init_v[None]
            centre[None] = ti.Vector([0.0, 0.0])

        @ti.kernel
        def p2g(s: ti.i32):
            for p in range(n):
                base = ti.cast(x[s, p] / DX - 0.5, ti.i32)
                fx = x[s, p] / DX - ti.cast(base, ti.f64)
                w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
                stress = -DT * 4 * STIFFNESS * p_vol * (J[s, p] - 1) / DX ** 2
                affine = ti.Matrix([[stress, 0.0], [0.0, stress]]) + p_mass * C[s, p]
                for i in ti.static(range(3)):
                    for j in ti.static(range(3)):
                        offset = ti.Vector([i, j])
                        dpos = (ti.cast(offset, ti.f64) - fx) * DX
                        weight = w[i][0] * w[j][1]
                        node = base + offset
                        grid_v[s, node[0], node[1]] += weight * (p_mass * v[s, p]
                                                                 + affine @ dpos)
                        grid_m[s, node[0], node[1]] += weight * p_mass

        @ti.kernel
        def grid_op(s: ti.i32):
            for i, j in ti.ndrange(GRID, GRID):
                velocity = grid_v[s, i, j] / (grid_m[s, i, j] + 1e-10)
                velocity[1] -= DT * GRAVITY
                if i < BOUND and velocity[0] < 0:
                    velocity[0] = 0
                if i > GRID - BOUND and velocity[0] > 0:
                    velocity[0] = 0
                if j < BOUND and velocity[1] < 0:
                    velocity[1] = 0
                if j > GRID - BOUND and velocity[1] > 0:
                    velocity[1] = 0
                grid_vo[s, i, j] = velocity

        @ti.kernel
        def g2p(s: ti.i32):
            for p in range(n):
                base = ti.cast(x[s, p] / DX - 0.5, ti.i32)
                fx = x[s, p] / DX - ti.cast(base, ti.f64)
                w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1) ** 2, 0.5 * (fx - 0.5) ** 2]
                new_v = ti.Vector([0.0, 0.0])
                new_C = ti.Matrix([[0.0, 0.0], [0.0, 0.0]])
                for i in ti.static(range(3)):
                    for j in ti.static(range(3)):
                        offset = ti.Vector([i, j])
                        dpos = ti.cast(offset, ti.f64) - fx          # in cells
                        node = base + offset
                        g_v = grid_vo[s, node[0], node[1]]
                        weight = w[i][0] * w[j][1]
                        new_v += weight * g_v
                        new_C += 4 * weight * g_v.outer_product(dpos) / DX
                v[s + 1, p] = new_v
                x[s + 1, p] = x[s, p] + DT * new_v
                C[s + 1, p] = new_C
                J[s + 1, p] = J[s, p] * (1 + DT * new_C.trace())

        @ti.kernel
        def measure():
            for p in range(n):
                centre[None] += x[steps, p] / n

        @ti.kernel
        def distance():
            loss[None] = (centre[None] - ti.Vector(TARGET)).norm_sqr()

        self.kernels = launch, p2g, grid_op, g2p, measure, distance

    def simulate(self):
        launch, p2g, grid_op, g2p, measure, distance = self.kernels
        launch()
        for s in range(self.steps):
            p2g(s)
            grid_op(s)
            g2p(s)
        measure()
        distance()

    def gradient_step(self, rate: float) -> float:
        """One Tape, one step of length `rate` against the gradient; -> the loss before."""
        with ti.ad.Tape(self.loss):
            self.simulate()
        gradient = self.init_v.grad[None].to_numpy()
        step = rate * gradient / (np.linalg.norm(gradient) + 1e-12)
        self.init_v[None] = self.init_v[None].to_numpy() - step
        return self.loss[None]


def main(argv=None) -> dict:
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--rounds", type=int, default=4)
    arguments.add_argument("--steps", type=int, default=12)
    options = arguments.parse_args(argv)
    ti.init(default_fp=ti.f64)
    blob = Blob(options.steps)
    blob.init_v[None] = [0.0, 0.0]
    losses = []
    with LossBar(options.rounds, "throwing") as bar:
        for k in range(options.rounds):
            losses.append(blob.gradient_step(rate=1.5 * 0.5 ** k))
            bar.advance(losses[-1])
    blob.simulate()
    losses.append(blob.loss[None])
    velocity = blob.init_v[None].to_numpy()
    print(f"mpm: {blob.n} particles, {GRID}x{GRID} grid, {blob.steps} steps; loss "
          f"{losses[0]:.4g} -> {losses[-1]:.4g} in {options.rounds} rounds; initial "
          f"velocity ({velocity[0]:.3f}, {velocity[1]:.3f})")
    positions = blob.x.to_numpy()

    def draw(figure):
        left, right = figure.subplots(1, 2)
        left.semilogy(losses, marker="o")
        left.set(xlabel="round", ylabel="loss", title="squared distance to the target")
        right.scatter(*positions[0].T, s=8, label="start")
        right.scatter(*positions[-1].T, s=8, label="after the last step")
        right.plot(*positions.mean(axis=1).T, color="black", linewidth=1, label="centre")
        right.scatter(*TARGET, marker="x", color="tab:red", s=60, label="target")
        right.set(xlim=(0.1, 0.5), ylim=(0.2, 0.5), aspect="equal", title="the blob")
        right.legend(fontsize=7)

    save_png(options.plot, draw)
    return {"blob": blob, "losses": losses}


if __name__ == "__main__":
    main()
