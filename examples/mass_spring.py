"""Mass-spring robot: optimise its springs' actuation so that it walks to a target, by Tape.

DiffTaichi's mass_spring, small: a lattice of point masses joined by springs whose rest
lengths pulse, r_s (1 + amp_s sin(omega t + phase_s)), standing on a frictional ground. The
loss is the squared distance of the centre of mass, after the last step, from a target to the
right; gradient descent on amp and phase (normalised steps) lowers it. State is indexed by time
(x[t, i], v[t, i]): nothing the adjoint replays is overwritten.

Run it:  tinyad example mass_spring [--rounds N] [--steps S] [--plot out.png]
"""
import numpy as np

import tinyad as ti
from tinyad.examples._show import LossBar, parser, save_png

DT, MASS, STIFFNESS, DAMPING, GRAVITY = 2e-3, 1.0, 600.0, 2.0, 9.8
GROUND, GROUND_STIFFNESS, FRICTION = 0.0, 3e3, 20.0
OMEGA = 2 * np.pi * 4


def lattice(nx: int, ny: int):
    """Positions (n, 2) and springs as (a, b) pairs: right, up and both diagonals."""
    positions = np.array([(0.1 * i, 0.1 * j) for i in range(nx) for j in range(ny)])
    springs = [(i * ny + j, (i + di) * ny + j + dj)
               for i in range(nx) for j in range(ny)
               for di, dj in ((1, 0), (0, 1), (1, 1), (1, -1))
               if i + di < nx and 0 <= j + dj < ny]
    return positions, np.array(springs, dtype=np.int32)


class Robot:
    def __init__(self, nx: int = 4, ny: int = 2, steps: int = 120):
        positions, springs = lattice(nx, ny)
        self.n, self.n_springs, self.steps = len(positions), len(springs), steps
        n, ns = self.n, self.n_springs
        # each field named by its variable, so that reports name it
        x = ti.Vector.field(2, ti.f64, shape=(steps + 1, n), needs_grad=True)
        v = ti.Vector.field(2, ti.f64, shape=(steps + 1, n), needs_grad=True)
        force = ti.Vector.field(2, ti.f64, shape=(steps, n), needs_grad=True)
        spring_a = ti.field(ti.i32, shape=ns)
        spring_b = ti.field(ti.i32, shape=ns)
        rest = ti.field(ti.f64, shape=ns)
        amp = ti.field(ti.f64, shape=ns, needs_grad=True)
        phase = ti.field(ti.f64, shape=ns, needs_grad=True)
        com = ti.Vector.field(2, ti.f64, shape=(), needs_grad=True)
        loss = ti.field(ti.f64, shape=(), needs_grad=True)
        self.x, self.v, self.force, self.com, self.loss = x, v, force, com, loss
        self.spring_a, self.spring_b, self.rest, self.amp, self.phase = (
            spring_a, spring_b, rest, amp, phase)
        self.target = ti.Vector([float(positions[:, 0].mean()) + 0.15, 0.05])

        self.spring_a.from_numpy(springs[:, 0])
        self.spring_b.from_numpy(springs[:, 1])
        self.rest.from_numpy(np.linalg.norm(positions[springs[:, 1]]
                                            - positions[springs[:, 0]], axis=1))
        rng = np.random.default_rng(0)
        self.amp.from_numpy(0.05 * rng.random(ns))
        self.phase.from_numpy(2 * np.pi * rng.random(ns))
        start = np.zeros((steps + 1, n, 2))
        start[0] = positions
        self.x.from_numpy(start)
        self._kernels()

    def _kernels(self):
        x, v, force, amp, phase, rest = self.x, self.v, self.force, self.amp, self.phase, self.rest
        spring_a, spring_b, com, loss = self.spring_a, self.spring_b, self.com, self.loss
        n, n_springs, steps, target = self.n, self.n_springs, self.steps, self.target

        @ti.kernel
        def clear():
            for t, i in force:
                force[t, i] = ti.Vector([0.0, 0.0])
            com[None] = ti.Vector([0.0, 0.0])

        @ti.kernel
        def spring_forces(t: ti.i32):
            for s in range(n_springs):
                a, b = spring_a[s], spring_b[s]
                d = x[t, b] - x[t, a]
                length = d.norm()
                pulse = rest[s] * (1 + amp[s] * ti.sin(OMEGA * t * DT + phase[s]))
                f = STIFFNESS * (length - pulse) * d / length
                force[t, a] += f
                force[t, b] -= f

        @ti.kernel
        def advance(t: ti.i32):
            for i in range(n):
                depth = ti.max(GROUND - x[t, i][1], 0.0)
                ground = ti.Vector([-FRICTION * depth * v[t, i][0] * 100,
                                    GROUND_STIFFNESS * depth])
                gravity = ti.Vector([0.0, -GRAVITY * MASS])
                total = force[t, i] + ground + gravity
                v[t + 1, i] = v[t, i] * (1 - DAMPING * DT) + DT * total / MASS
                x[t + 1, i] = x[t, i] + DT * v[t + 1, i]

        @ti.kernel
        def centre():
            for i in range(n):
                com[None] += x[steps, i] / n

        @ti.kernel
        def distance():
            loss[None] = (com[None] - target).norm_sqr()

        self.kernels = clear, spring_forces, advance, centre, distance

    def simulate(self):
        clear, spring_forces, advance, centre, distance = self.kernels
        clear()     # in a kernel, not fill(): ti.ad.verify replays kernels only
        for t in range(self.steps):
            spring_forces(t)
            advance(t)
        centre()
        distance()

    @ti.capture
    def walk_and_differentiate(self):
        """One Tape over a whole walk. The same launches every round, so ti.capture records
        them on the first call and, in fast mode, runs them as one compiled program from then
        on (docs/capture.md); the optimiser's reads and writes stay outside, in Python."""
        with ti.ad.Tape(self.loss):
            self.simulate()

    def gradient_step(self, rate: float) -> float:
        """One Tape, one normalised step on amp and phase; -> the loss before the step."""
        self.walk_and_differentiate()
        g_amp, g_phase = self.amp.grad.to_numpy(), self.phase.grad.to_numpy()
        norm = np.sqrt((g_amp ** 2).sum() + (g_phase ** 2).sum()) + 1e-12
        self.amp.from_numpy(np.clip(self.amp.to_numpy() - rate * g_amp / norm, 0.0, 0.3))
        self.phase.from_numpy(self.phase.to_numpy() - rate * g_phase / norm)
        return self.loss[None]


def main(argv=None) -> dict:
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--rounds", type=int, default=6)
    arguments.add_argument("--steps", type=int, default=100)
    options = arguments.parse_args(argv)
    ti.init(default_fp=ti.f64)
    robot = Robot(steps=options.steps)
    losses = []
    with LossBar(options.rounds, "walking") as bar:
        for _ in range(options.rounds):
            losses.append(robot.gradient_step(rate=0.08))
            bar.advance(losses[-1])
    robot.simulate()
    losses.append(robot.loss[None])
    print(f"mass_spring: {robot.n} masses, {robot.n_springs} springs, {robot.steps} steps; "
          f"loss {losses[0]:.5f} -> {losses[-1]:.5f} in {options.rounds} rounds")
    path = robot.x.to_numpy()[:, :, 0].mean(axis=1)

    def draw(figure):
        left, right = figure.subplots(1, 2)
        left.plot(losses, marker="o")
        left.set(xlabel="round", ylabel="loss", title="squared distance to the target")
        right.plot(np.arange(len(path)) * DT, path, label="centre of mass x")
        right.axhline(robot.target[0], color="gray", linestyle="--", label="target x")
        right.set(xlabel="time (s)", ylabel="x", title="the last walk")
        right.legend()

    save_png(options.plot, draw)
    return {"robot": robot, "losses": losses}


if __name__ == "__main__":
    main()
