"""The optimisation examples (mass_spring, wave_inverse, mpm, ewma_debugging) run at small sizes
in each mode: their losses fall, their gradients agree with an independent truth (central
finite differences in f64 through ti.ad.verify, numpy, or a formula), and --plot writes a PNG
(or says in one line that matplotlib is missing)."""
import builtins
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
