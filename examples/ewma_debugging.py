"""The EWMA debugging story (Taichi issues #2425, #2485): from a rule break to a fitted decay.

An exponentially weighted moving average per row, e_0 = d_0, e_c = (1 - a) e_(c-1) + a d_c,
with the decay a to be fitted so that the EWMA of noisy data matches a reference. Step 1 is the
issue's program: the column comes from a counter, `sample[row] += 1`, and the adjoint would
replay the final count (Taichi reads past the end of the field there, silently); tinyad stops
it with its report. Step 2 is the issue's fix, explicit taping with the column as the index,
checked against sympy. Step 3 fits a by gradient descent.

Run it:  tinyad example ewma_debugging [--rounds N] [--cols N] [--plot out.png]
"""
import numpy as np

import tinyad as ti
from tinyad.examples._show import LossBar, parser, save_png

TRUE_DECAY = 0.3


class Smoother:
    def __init__(self, rows: int, cols: int):
        self.rows, self.cols = rows, cols
        data = ti.field(ti.f64, shape=(rows, cols))
        decay = ti.field(ti.f64, shape=(), needs_grad=True)
        ewma_tape = ti.field(ti.f64, shape=(rows, cols), needs_grad=True)
        reference = ti.field(ti.f64, shape=(rows, cols))
        sample = ti.field(ti.i32, shape=rows)
        loss = ti.field(ti.f64, shape=(), needs_grad=True)
        self.data, self.decay, self.ewma_tape, self.reference, self.loss = (
            data, decay, ewma_tape, reference, loss)
        self.sample = sample

        @ti.kernel
        def ewma_by_counter():      # the program: the column from a counter
            for row in range(rows):
                for col in range(cols):
                    col_idx = sample[row]
                    if col_idx == 0:
                        ewma_tape[row, col_idx] = data[row, col_idx]
                    else:
                        ewma_tape[row, col_idx] = ((1 - decay[None])
                                                   * ewma_tape[row, col_idx - 1]
                                                   + decay[None] * data[row, col_idx])
                    sample[row] += 1   # read above, changed here: Rule 1

        @ti.kernel
        def ewma_taped():           # the fix: the column is the loop index
            for row in range(rows):
                ewma_tape[row, 0] = data[row, 0]
                for col in range(1, cols):
                    ewma_tape[row, col] = ((1 - decay[None]) * ewma_tape[row, col - 1]
                                           + decay[None] * data[row, col])

        @ti.kernel
        def misfit():
            for row, col in ti.ndrange(rows, cols):
                loss[None] += (ewma_tape[row, col] - reference[row, col]) ** 2

        self.ewma_by_counter, self.ewma_taped, self.misfit = ewma_by_counter, ewma_taped, misfit

    def forward(self):
        self.ewma_taped()
        self.misfit()

    def gradient_step(self, rate: float) -> float:
        with ti.ad.Tape(self.loss):
            self.forward()
        self.decay[None] = self.decay[None] - rate * self.decay.grad[None]
        return self.loss[None]


def numpy_ewma(data: np.ndarray, decay: float) -> np.ndarray:
    out = np.empty_like(data)
    out[:, 0] = data[:, 0]
    for col in range(1, data.shape[1]):
        out[:, col] = (1 - decay) * out[:, col - 1] + decay * data[:, col]
    return out


def main(argv=None) -> dict:
    arguments = parser(__doc__.splitlines()[0])
    arguments.add_argument("--rounds", type=int, default=20)
    arguments.add_argument("--rows", type=int, default=3)
    arguments.add_argument("--cols", type=int, default=48)
    options = arguments.parse_args(argv)
    ti.init(default_fp=ti.f64)
    smoother = Smoother(options.rows, options.cols)
    rng = np.random.default_rng(0)
    signal = np.sin(np.linspace(0, 3 * np.pi, options.cols))[None, :] * (1 + np.arange(
        options.rows))[:, None]
    data = signal + 0.3 * rng.standard_normal(signal.shape)
    smoother.data.from_numpy(data)
    smoother.reference.from_numpy(numpy_ewma(data, TRUE_DECAY))
    smoother.decay[None] = 0.7

    print("1. the issue's program, the column from a counter:")
    try:
        with ti.ad.Tape(smoother.loss):
            smoother.ewma_by_counter()
            smoother.misfit()
        print("   no report")
    except ti.AutodiffRuleError as error:
        print("   tinyad stops it:", str(error).splitlines()[0])

    print("2. explicit taping, the column as the index:")
    smoother.sample.fill(0)
    check = ti.ad.verify(smoother.forward, smoother.loss, [smoother.decay], method="fd")
    print("  ", check.headline())

    losses = []
    with LossBar(options.rounds, "fitting the decay") as bar:
        for _ in range(options.rounds):
            losses.append(smoother.gradient_step(rate=5e-4))
            bar.advance(losses[-1])
    decay = smoother.decay[None]
    print(f"3. gradient descent: decay 0.7 -> {decay:.4f} (the data's: {TRUE_DECAY}), "
          f"misfit {losses[0]:.4g} -> {losses[-1]:.3g} in {options.rounds} rounds")

    def draw(figure):
        left, right = figure.subplots(1, 2)
        left.semilogy(losses)
        left.set(xlabel="round", ylabel="misfit", title="squared misfit to the reference")
        row = options.rows - 1
        right.plot(data[row], ".", color="gray", label="data")
        right.plot(numpy_ewma(data, TRUE_DECAY)[row], "--", label="reference EWMA")
        right.plot(smoother.ewma_tape.to_numpy()[row], label=f"fitted, decay {decay:.3f}")
        right.set(xlabel="column", title=f"row {row}")
        right.legend()

    save_png(options.plot, draw)
    return {"smoother": smoother, "losses": losses, "data": data}


if __name__ == "__main__":
    main()
