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


def test_progress_promises_a_backward_pass_only_while_one_is_owed(monkeypatch, capsys):
    """An optimisation loop's progress lines promised 'a backward pass ... about N s more' for
    Tapes whose backward passes had already run."""
    monkeypatch.setattr(progress, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(progress, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    ti.init(mode="interp")
    step = _program()
    shown = progress.Progress()
    shown.launched(step, 3.0, "primal")
    shown.launched(step, 3.0, "primal")
    assert "backward pass over the taped ones takes about 6 s more" in capsys.readouterr().err
    shown.launched(step, 2.5, "adjoint")
    shown.launched(step, 3.0, "adjoint")
    during, after = capsys.readouterr().err.splitlines()
    assert "takes about 4 s more" in during       # 6 s owed, 2.5 s of it replayed
    assert "interp: 4 launches, 12 s so far" in after and "backward" not in after


def test_a_warning_set_off_by_many_quick_launches_says_so(monkeypatch, capsys):
    """Not 'kernel step took 0.0 s': the run's total set it off."""
    monkeypatch.setattr(progress, "LONG_LAUNCH_S", 1.0)
    monkeypatch.setattr(progress, "LONG_RUN_S", 20.0)
    ti.init(mode="interp")
    step = _program()
    shown = progress.Progress()
    for _ in range(30):
        shown.launched(step, 0.7, "primal")
    err = capsys.readouterr().err
    assert err.count("interp mode is slow") == 1
    assert "its 29 launches have taken 20.3 s so far (the latest: kernel step, fields of 150 " \
           "elements)" in err
    assert "0.0 s" not in err
