"""Wave inverse problem: recover a string's initial shape from what two sensors recorded.

A 1-D wave equation, leapfrog in time with fixed ends: u[t + 1] = 2 u[t] - u[t - 1] + c^2 (the
discrete Laplacian of u[t]). The true initial shape (two bumps) is unknown; two sensors record
u over time. Starting from a flat string, gradient descent on the initial shape, by Tape,
fits the recordings: the loss is the squared misfit at the sensors over all steps. The state
is indexed by time (u[t, i]), so the adjoint replays nothing overwritten.

Run it:  tinyad example wave_inverse [--rounds N] [--cells N] [--steps S] [--plot out.png]
"""
import numpy as np

import tinyad as ti
from tinyad.examples._show import LossBar, parser, save_png

COURANT2 = 0.25     # (c dt / dx)^2: stable below 1


def true_shape(cells: int) -> np.ndarray:
    grid = np.linspace(0, 1, cells)
    return np.exp(-((grid - 0.3) / 0.06) ** 2) + 0.5 * np.exp(-((grid - 0.7) / 0.1) ** 2)


class String:
    def __init__(self, cells: int, steps: int):
        self.cells, self.steps = cells, steps
        self.sensors = np.array([cells // 5, (4 * cells) // 5], dtype=np.int32)
        n_sensors = len(self.sensors)
        shape = ti.field(ti.f64, shape=cells, needs_grad=True)          # the unknown
        u = ti.field(ti.f64, shape=(steps + 1, cells), needs_grad=True)
        sensor = ti.field(ti.i32, shape=n_sensors)
        recorded = ti.field(ti.f64, shape=(steps + 1, n_sensors))
        loss = ti.field(ti.f64, shape=(), needs_grad=True)
        self.shape, self.u, self.recorded, self.loss = shape, u, recorded, loss
        sensor.from_numpy(self.sensors)

        @ti.kernel
        def release():          # at rest: the first two rows are the initial shape
            for i in range(cells):
                u[0, i] = shape[i]
                u[1, i] = shape[i]

        @ti.kernel
        def step(t: ti.i32):
            for i in range(1, cells - 1):
                laplacian = u[t, i - 1] - 2 * u[t, i] + u[t, i + 1]
                u[t + 1, i] = 2 * u[t, i] - u[t - 1, i] + COURANT2 * laplacian

        @ti.kernel
        def misfit():
            for t, k in ti.ndrange(steps + 1, n_sensors):
                loss[None] += (u[t, sensor[k]] - recorded[t, k]) ** 2

        self.kernels = release, step, misfit

    def simulate(self):
        release, step, misfit = self.kernels
        release()
        for t in range(1, self.steps):
            step(t)
        misfit()

    def record(self, shape: np.ndarray) -> None:
        """What the sensors see when the string starts in `shape`."""
        self.shape.from_numpy(shape)
        self.simulate()
        self.recorded.from_numpy(self.u.to_numpy()[:, self.sensors])

    def gradient_step(self, rate: float) -> float:
        with ti.ad.Tape(self.loss):
            self.simulate()
        self.shape.from_numpy(self.shape.to_numpy() - rate * self.shape.grad.to_numpy())
        return self.loss[None]


def main(argv=None) -> dict:
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--rounds", type=int, default=30)
    arguments.add_argument("--cells", type=int, default=32)
    arguments.add_argument("--steps", type=int, default=64)
    options = arguments.parse_args(argv)
    ti.init(default_fp=ti.f64)
    string = String(options.cells, options.steps)
    truth = true_shape(options.cells)
    truth[0] = truth[-1] = 0.0          # the ends are fixed
    string.record(truth)
    string.shape.from_numpy(np.zeros(options.cells))
    losses = []
    with LossBar(options.rounds, "fitting the recordings") as bar:
        for _ in range(options.rounds):
            losses.append(string.gradient_step(rate=0.06))
            bar.advance(losses[-1])
    recovered = string.shape.to_numpy()
    error = np.abs(recovered - truth).max()
    print(f"wave_inverse: {options.cells} cells, {options.steps} steps, 2 sensors; "
          f"misfit {losses[0]:.4g} -> {losses[-1]:.4g} in {options.rounds} rounds; "
          f"largest error in the shape {error:.3f}")

    def draw(figure):
        left, right = figure.subplots(1, 2)
        left.semilogy(losses)
        left.set(xlabel="round", ylabel="misfit", title="squared misfit at the sensors")
        grid = np.arange(options.cells)
        right.plot(grid, truth, label="true initial shape", color="gray", linestyle="--")
        right.plot(grid, recovered, label="recovered")
        for position in string.sensors:
            right.axvline(position, color="tab:red", alpha=0.4)
        right.set(xlabel="cell (red: sensors)", ylabel="u at t = 0", title="the string")
        right.legend()

    save_png(options.plot, draw)
    return {"string": string, "losses": losses, "truth": truth, "recovered": recovered}


if __name__ == "__main__":
    main()
