"""The optimisation examples (mass_spring, wave_inverse, mpm, ewma_debugging) run at small sizes
in each mode: their losses fall, their gradients agree with an independent truth (central
finite differences in f64 through ti.ad.verify, numpy, or a formula), and --plot writes a PNG
(or says in one line that matplotlib is missing)."""
import builtins
import io
import runpy
from pathlib import Path

import numpy as np
import pytest

import tinyad as ti


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class Example:
    """An example's functions, loaded from its file under a name outside the tinyad package
    (so tinyad takes its frames for the user's, as when `tinyad example` runs it)."""

    def __init__(self, name):
        self.__dict__.update(runpy.run_path(str(EXAMPLES / f"{name}.py"),
                                            run_name=f"example_{name}"))


def example(name, mode, monkeypatch):
    monkeypatch.setenv("TINYAD_MODE", mode)
    return Example(name)


def test_mass_spring(mode, monkeypatch, capsys):
    mass_spring = example("mass_spring", mode, monkeypatch)
    result = mass_spring.main(["--rounds", "3", "--steps", "40"])
    losses = result["losses"]
    assert len(losses) == 4 and losses[-1] < losses[0]
    assert "loss" in capsys.readouterr().out
    robot = result["robot"]
    report = ti.ad.verify(robot.simulate, robot.loss, [robot.amp, robot.phase], method="fd")
    assert report.headline().endswith("agree with finite differences")


def test_plot_writes_a_png(monkeypatch, tmp_path):
    mass_spring = example("mass_spring", "interp", monkeypatch)
    picture = tmp_path / "walk.png"
    pytest.importorskip("matplotlib")
    mass_spring.main(["--rounds", "1", "--steps", "5", "--plot", str(picture)])
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_so_in_one_line(monkeypatch, tmp_path, capsys):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    mass_spring = example("mass_spring", "interp", monkeypatch)
    picture = tmp_path / "walk.png"
    mass_spring.main(["--rounds", "1", "--steps", "5", "--plot", str(picture)])
    err = capsys.readouterr().err
    assert not picture.exists()
    assert [line for line in err.splitlines() if "matplotlib" in line] == [
        "--plot needs matplotlib: pip install 'tinyad[plot]' (no picture written)"]


def _string_at_sensors(shape, steps, courant2=0.25):
    """numpy's own leapfrog: u at the two sensors, every step, as one vector."""
    cells = len(shape)
    u = np.zeros((steps + 1, cells))
    u[0] = u[1] = shape
    for t in range(1, steps):
        laplacian = u[t, :-2] - 2 * u[t, 1:-1] + u[t, 2:]
        u[t + 1, 1:-1] = 2 * u[t, 1:-1] - u[t - 1, 1:-1] + courant2 * laplacian
    return u[:, [cells // 5, (4 * cells) // 5]].ravel()


def test_wave_inverse(mode, monkeypatch):
    wave = example("wave_inverse", mode, monkeypatch)
    cells, steps = 12, 16
    result = wave.main(["--rounds", "4", "--cells", str(cells), "--steps", str(steps)])
    losses = result["losses"]
    assert all(later < earlier for earlier, later in zip(losses, losses[1:]))
    # the gradient at the recovered shape, against numpy: L = |A s - r|^2, dL/ds = 2 A^T (A s - r)
    A = np.stack([_string_at_sensors(e, steps) for e in np.eye(cells)], axis=1)
    recorded = _string_at_sensors(result["truth"], steps)
    s = result["recovered"]
    string = result["string"]
    with ti.ad.Tape(string.loss):
        string.simulate()
    assert string.loss[None] == pytest.approx(((A @ s - recorded) ** 2).sum(), rel=1e-12)
    assert np.allclose(string.shape.grad.to_numpy(), 2 * A.T @ (A @ s - recorded), rtol=1e-10,
                       atol=1e-12)


def _ewma(data, decay):
    out = data.copy()
    for col in range(1, data.shape[1]):
        out[:, col] = (1 - decay) * out[:, col - 1] + decay * data[:, col]
    return out


def test_ewma_debugging(mode, monkeypatch, capsys):
    ewma = example("ewma_debugging", mode, monkeypatch)
    result = ewma.main(["--rounds", "6", "--rows", "2", "--cols", "10"])
    out = capsys.readouterr().out
    assert "tinyad stops it: Global Data Access Rule 1: sample[0] was read" in out
    assert "all 1 elements agree with finite differences" in out
    losses, data, smoother = result["losses"], result["data"], result["smoother"]
    assert losses[-1] < losses[0]
    reference = _ewma(data, 0.3)

    def loss(decay):
        return ((_ewma(data, decay) - reference) ** 2).sum()

    decay = smoother.decay[None]
    assert abs(decay - 0.3) < abs(0.7 - 0.3)       # moved towards the data's decay
    with ti.ad.Tape(smoother.loss):
        smoother.forward()
    h = 1e-6
    assert smoother.loss[None] == pytest.approx(loss(decay), rel=1e-12)
    assert smoother.decay.grad[None] == pytest.approx(
        (loss(decay + h) - loss(decay - h)) / (2 * h), rel=1e-6)


def test_mpm(mode, monkeypatch):
    mpm = example("mpm", mode, monkeypatch)
    result = mpm.main(["--rounds", "2", "--steps", "4"])
    losses, blob = result["losses"], result["blob"]
    assert losses[-1] < losses[0]
    report = ti.ad.verify(blob.simulate, blob.loss, [blob.init_v], method="fd")
    assert report.headline().endswith("agree with finite differences")
    # d loss / d v0 by a formula: with no particle near a wall the grid moves the blob's centre
    # by DT times the mean velocity, so the centre's sensitivity to v0 is steps * DT (gravity
    # and pressure do not depend on v0 while every node is interior): 2 (c - target) steps DT
    x = blob.x.to_numpy()
    centre = x[-1].mean(axis=0)
    truth = 2 * (centre - np.array(mpm.TARGET)) * 4 * mpm.DT
    assert np.allclose(blob.init_v.grad[None].to_numpy(), truth, rtol=1e-3)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_loss_bar_draws_in_a_terminal_only():
    show = Example("_show")
    terminal, pipe = _Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        with show.LossBar(3, "fitting", stream=stream) as bar:
            for loss in (3.0, 2.0, 1.25):
                bar.advance(loss)
    assert "3/3" in terminal.getvalue() and "loss 1.25" in terminal.getvalue()
    assert pipe.getvalue() == ""
