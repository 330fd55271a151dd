"""Interp mode's size warning and progress lines (interp/progress.py)."""
import sys

import tinyad as ti
from tinyad.interp import progress


def _program():
    x = ti.field(ti.f32, shape=(3, 50))

    @ti.kernel
    def step(t: ti.i32):
        for i in range(50):
            x[t + 1, i] = x[t, i] * 0.5 + 1.0
    return step


def test_a_slow_launch_warns_once_with_the_size_and_suggests_fast_mode(monkeypatch, capsys):
    monkeypatch.setattr(progress, "LONG_LAUNCH_S", 0.0)
    ti.init(mode="interp")
    step = _program()
    step(0)
    step(1)
    err = capsys.readouterr().err
    assert err.count("interp mode is slow") == 1
    assert "kernel step (fields of 150 elements)" in err
    assert 'ti.init(mode="fast")' in err


def test_progress_lines_only_in_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.0)
    ti.init(mode="interp")
    step = _program()
    step(0)
    assert "launches" not in capsys.readouterr().err      # a pipe: no progress lines
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    step(0)
    step(1)
    err = capsys.readouterr().err
    assert "interp: 2 launches" in err and "interp: 3 launches" in err
    assert "s per launch" in err


def test_a_quick_program_says_nothing(capsys):
    ti.init(mode="interp")
    _program()(0)
    assert capsys.readouterr().err == ""
