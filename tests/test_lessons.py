"""Every lesson runs start to finish (as `tinyad lesson N --no-pause` does) in each mode, and
its numbers agree with an independent truth (a formula, numpy); the screens fit a pipe at 80
columns without breaking code; the stepping keys, `tinyad lessons` and `tinyad explain`."""
import io
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinyad import lessons
from tinyad.cli import main


def run_lesson(key, mode, monkeypatch, **options):
    monkeypatch.setenv("TINYAD_MODE", mode)
    out = io.StringIO()
    namespace = lessons.run(key, pause=False, out=out, **options)
    return namespace, out.getvalue()


def test_lessons_are_numbered_and_titled():
    found = lessons.all_lessons()
    assert [lesson.number for lesson in found] == list(range(1, len(found) + 1))
    assert len(found) >= 9 and all(lesson.title for lesson in found)


def test_first_derivative(mode, monkeypatch):
    ns, out = run_lesson(1, mode, monkeypatch)
    assert ns["x"].grad[None] == pytest.approx(math.cos(0.7), rel=1e-6)
    assert ns["dy_dx"][None] == pytest.approx(math.cos(0.7), rel=1e-6)
    assert "x.grad[] += g * cos(x[])" in out and "agree with sympy" in out


def test_reverse_mode(mode, monkeypatch):
    ns, out = run_lesson(2, mode, monkeypatch)
    x = ns["x"].to_numpy()
    assert "restore v" in out
    # the panels of the Tape step: the tape, the values, the formula, one element's log
    assert "1. energy()" in out and "   energy.grad()" in out
    assert "x_0*sin(x_0) + x_1*sin(x_1) + x_2*sin(x_2)" in out
    grads = [math.sin(v) + v * math.cos(v) for v in (0.1, 0.7, 1.3)]
    assert "x.grad = [" + " ".join(f"{g:.4f}" for g in grads) + "]" in out
    assert "energy (launch #1) replays its read at line 26: still in the field" in out
    # energy(): d/dx sum(x sin x) at x = [0.1, 0.7, 1.3] is checked in-lesson; iterate() by FD
    v_of = lambda x0, x1: _iterate(x0, x1, 20)   # noqa: E731
    h = 1e-6
    assert ns["x"].grad[0] == pytest.approx((v_of(x[0] + h, x[1]) - v_of(x[0] - h, x[1])) / (2 * h),
                                            rel=1e-5)
    assert ns["x"].grad[1] == pytest.approx((v_of(x[0], x[1] + h) - v_of(x[0], x[1] - h)) / (2 * h),
                                            rel=1e-5)


def _iterate(x0, x1, n):
    v = x0
    for _ in range(n):
        v = math.sin(v) * 0.9 + x1
    return v


def test_gravity_forces_are_minus_the_energy_gradient(mode, monkeypatch):
    ns, _ = run_lesson(3, mode, monkeypatch)
    # after the last substep's Tape: x.grad is dU/dx at the positions before its advance
    assert ns["worst"] < 1e-5
    positions = ns["positions"]
    diff = positions[:, None, :] - positions[None, :, :]
    s = np.sqrt((diff ** 2).sum(axis=2) + 1e-3)
    assert ns["U"][None] != 0 and np.isfinite(ns["x"].to_numpy()).all()
    assert np.allclose(ns["analytic_grad"], 2 * (diff / s[:, :, None] ** 3).sum(axis=1))


def test_kernel_grad_several_outputs(mode, monkeypatch):
    ns, out = run_lesson(4, mode, monkeypatch)
    assert np.array_equal(ns["x"].grad.to_numpy(), 2 * np.arange(16) + 1)
    assert "x.grad[3] = 14.0" in out and "x.grad[3] = 7.0" in out


def test_lazy_grad_and_place(mode, monkeypatch):
    _, out = run_lesson(5, mode, monkeypatch)
    rows = re.findall(r"a.grad = \[([\d. ]+)\]", out)
    assert len(rows) == 4 and all(row.split() == ["10.", "11.", "12.", "13."] for row in rows)
    assert "already placed" in out and "not allocated" in out


def test_rule_1(mode, monkeypatch):
    ns, out = run_lesson(6, mode, monkeypatch)
    assert "x.grad[1] = 110.0" in out          # Taichi's silent wrong gradient
    assert ns["x"].grad[1] == 10.0             # the fix: loss = x[1] * b
    if mode == "interp":
        assert "Global Data Access Rule 1: b[] was read" in out


def test_rule_2(mode, monkeypatch):
    ns, out = run_lesson(7, mode, monkeypatch)
    assert "x.grad[1] = 4.0  x.grad[2] = 6.0" in out      # wrong, silently
    assert (ns["x"].grad[1], ns["x"].grad[2]) == (4.0, 3.0)   # loss = (2 + x1^2) x2
    if mode == "interp":
        assert "Global Data Access Rule 2" in out


def test_kernel_simplicity(mode, monkeypatch):
    ns, out = run_lesson(8, mode, monkeypatch)
    x = np.array([0.5, 1.5, 2.5, 3.5])
    # task3_static's loss: (x0 + x1)^2 + 2 sin x2 + 2 sin x3
    truth = [2 * (x[0] + x[1]), 2 * (x[0] + x[1]), 2 * math.cos(x[2]), 2 * math.cos(x[3])]
    assert np.allclose(ns["x"].grad.to_numpy(), truth)
    assert out.count("agree with sympy") == 3 and "KernelSimplicityRuleError" in out


def test_custom_gradients(mode, monkeypatch):
    ns, out = run_lesson(9, mode, monkeypatch)
    assert "the custom gradient backward is not the derivative of forward" in out
    assert "x.grad[0] = 4.0" in out and "128 of 128 elements disagree" in out
    assert ns["x"].grad[0] == 8.0              # total = 2 * 4 * sum(x)


def test_gradient_bugs(mode, monkeypatch):
    """Lesson 16: the copy passes the gradient (2 x); each of the three lost gradients is
    reported, the wrong custom adjoint off by its factor 3; the NaN is traced to sqrt, a
    warning when the backward pass leaves it and the error when p.grad is read; the optimiser
    step launched inside the Tape and the manual sweep missing copy_in.grad() are warned of."""
    _, out = run_lesson(16, mode, monkeypatch)
    assert "x.grad = [2. 4. 6. 8.]" in out       # 2 x, through the copy
    assert "Gradient read inside the Tape (warning)" in out and "step = [0. 0. 0. 0.]" in out
    assert "Loss computed after the Tape" in out and "late_energy" in out
    found = re.search(r"finite differences of cube give (\S+)\s+and cube_adjoint gives (\S+)\.",
                      out)
    assert found, out
    assert float(found[1]) == pytest.approx(3 * float(found[2]), rel=1e-6)
    flat = " ".join(out.split())         # (reports wrap at the terminal's width)
    assert "Non-finite gradient (warning): p.grad[1, 1] became nan" in flat and "sqrt" in out
    assert "Non-finite gradient: p.grad[1, 1]" in flat and "Python scope reads p.grad" in flat
    assert "the kernel descend reads x.grad inside the Tape" in flat
    assert "x = [1. 2. 3. 4.] x.grad = [2. 4. 6. 8.]" in out      # the step moved x by zeros
    assert "Adjoint skipped (warning)" in flat and "copy_in.grad() (forward launch" in flat
    assert "x.grad = [0. 0. 0. 0.]" in out                        # the truncated gradient


def test_out_of_bounds_and_nan(mode, monkeypatch):
    """Lesson 17: the read at index -1 is reported at its line; the 0/0 at the division, with
    the guard as the fix; the printed finite differences and the fixed program's gradient
    agree with a numpy re-computation of the rays (central differences in f64)."""
    ns, out = run_lesson(17, mode, monkeypatch)
    assert "index (0, -1) is out of bounds for field tape" in out
    assert "Non-finite gradient: far.grad[] became nan" in out and "f64(s) / f64(n - 1)" in out
    h = 1e-6
    for name, unit in (("near", (1.0, 0.0)), ("far", (0.0, 1.0))):
        for guard, printed in ((False, rf"^d loss / d {name} *= (\S+)"),
                               (True, rf"^{name}\.grad *= \S+  finite differences: (\S+)")):
            truth = (_rays(0.6 + h * unit[0], 3.3 + h * unit[1], guard)
                     - _rays(0.6 - h * unit[0], 3.3 - h * unit[1], guard)) / (2 * h)
            assert float(re.search(printed, out, re.M)[1]) == pytest.approx(truth, abs=2e-6)
            if guard:
                assert ns[name].grad[None] == pytest.approx(truth, rel=1e-6)
    assert "nan_to_num gives 0.0" in out
    printed_loss = float(re.search(r"^loss = (\S+)", out, re.M)[1])
    assert printed_loss == pytest.approx(_rays(0.6, 3.3, True), abs=1e-6)


def _rays(near, far, guard):
    """Lesson 17's loss in numpy: three rays of 4, 3 and 1 samples, composited front to back
    from an empty start; unguarded, the one-sample ray's 0/0 position clamps to 0."""
    density = [0.1, 0.3, 0.6, 0.2, 0.4]
    total = 0.0
    for n in (4, 3, 1):
        opacity = 0.0
        for s in range(n):
            u = s / max(n - 1, 1) if guard or n > 1 else math.nan
            x = near + (far - near) * u
            x = 0.0 if math.isnan(x) else min(max(x, 0.0), 3.999)
            i = math.floor(x)
            alpha = (1 - (x - i)) * density[i] + (x - i) * density[i + 1]
            opacity += (1 - opacity) * alpha
        total += opacity
    return total


# ---- rendering and stepping -----------------------------------------------------------------
@pytest.mark.parametrize("lesson", [lesson.number for lesson in lessons.all_lessons()])
def test_screens_fit_a_pipe_without_breaking_code(lesson):
    """Through a pipe at 80 columns: every code cell appears whole, line for line as in the
    lesson file (none broken mid-token); no line ends in a space."""
    result = subprocess.run([sys.executable, "-m", "tinyad.cli", "lesson", str(lesson)],
                            capture_output=True, text=True, timeout=300,
                            env={**_env(), "COLUMNS": "80", "TINYAD_MODE": "interp"})
    assert result.returncode == 0, result.stderr
    for line in result.stdout.splitlines():
        assert line == line.rstrip(), line
    for step in lessons.find(lesson).steps():
        code = "\n".join(f"  {line}".rstrip() for line in step.code.splitlines())
        assert code in result.stdout
    assert "step 1/" in result.stdout and "lesson" in result.stdout.splitlines()[-1]


def _env():
    import os   # noqa: PLC0415
    return dict(os.environ)


class Keys:
    """A fake input(): answers in turn, then EOFError (Ctrl-D)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.prompts = 0

    def __call__(self, prompt):
        self.prompts += 1
        if not self.answers:
            raise EOFError
        answer = self.answers.pop(0)
        if answer is KeyboardInterrupt:
            raise KeyboardInterrupt
        return answer


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _stepped(monkeypatch, *answers):
    monkeypatch.setenv("TINYAD_MODE", "interp")
    monkeypatch.setattr(sys, "stdin", Terminal())
    out, keys = Terminal(), Keys(*answers)
    lessons.run(1, ask=keys, out=out)
    return out.getvalue(), keys


def test_enter_steps_and_b_goes_back_without_running_again(monkeypatch):
    ran = []
    real_run_step = lessons.run_step
    monkeypatch.setattr(lessons, "run_step", lambda *a: ran.append(1) or real_run_step(*a))
    text, keys = _stepped(monkeypatch, "", "b", "", "", "")
    steps = re.findall(r"step (\d)/4", text)
    assert steps == ["1", "2", "1", "2", "3", "4"] and len(ran) == 4
    assert text.count("by hand: dy/dx = 0.76") == 2 and "Next: tinyad lesson 2" in text


@pytest.mark.parametrize("answer", ["q", KeyboardInterrupt])
def test_q_and_ctrl_c_quit(monkeypatch, answer):
    text, keys = _stepped(monkeypatch, "", answer)
    assert re.findall(r"step (\d)/4", text) == ["1", "2"] and "Next:" not in text


def test_ctrl_d_quits(monkeypatch):
    text, keys = _stepped(monkeypatch)
    assert re.findall(r"step (\d)/4", text) == ["1"] and keys.prompts == 1


def test_no_pause_without_a_terminal(monkeypatch):
    text = _stepped_plain(monkeypatch)
    assert "step 4/4" in text


def _stepped_plain(monkeypatch):
    monkeypatch.setenv("TINYAD_MODE", "interp")
    out = io.StringIO()
    lessons.run(1, ask=Keys(), out=out)   # Keys() would raise EOFError if asked
    return out.getvalue()


def test_lesson_found_by_name(monkeypatch):
    assert lessons.find("gravity").number == 3 == lessons.find("03").number
    with pytest.raises(lessons.NoSuchLesson, match="is no lesson"):
        lessons.find("nothing")


def test_tinyad_lessons_lists_titles(capsys):
    assert main(["lessons"]) == 0
    out = capsys.readouterr().out
    assert "gravity" in out and "forces from energy" in out


def test_lesson_command_with_stdin_closed():
    """Input not a terminal (here /dev/null): runs straight through, no EOFError."""
    result = subprocess.run([sys.executable, "-m", "tinyad.cli", "lesson", "first_derivative"],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=300, env={**_env(), "TINYAD_MODE": "interp"})
    assert result.returncode == 0 and "step 4/4" in result.stdout, result.stderr
    assert "Traceback" not in result.stderr


def test_explain(capsys):
    example = Path(__file__).resolve().parent.parent / "examples" / "broken_rule1.py"
    assert main(["explain", f"{example}::func_broke_rule_1"]) == 0
    out = capsys.readouterr().out
    assert "adjoint IR (kernel.grad.ir)" in out and "b.grad[] += g * x[1]" in out
    assert "reads b[]  (line 22)" in out and "line 23 writes b[] (+=)" in out
    # the recording variant: b is read for the adjoint, then added to, in one launch
    assert "accesses to b. Where neither" in out
    assert "_values_func_broke_rule_1[_row0] = f64(b[])" in out
    assert main(["explain", f"{example}::nope"]) == 2
    assert "defines no kernel 'nope'" in capsys.readouterr().err


def test_ewma_explicit_taping(mode, monkeypatch):
    ns, out = run_lesson(10, mode, monkeypatch)
    d = np.arange(8, dtype=np.float64).reshape(2, 4) / 4
    weights = np.array([0.125, 0.125, 0.25, 0.5])          # e_3 = sum(weights * d)
    truth = 2 * (d @ weights)[:, None] * weights[None, :]  # d(sum_rows e_3^2)/dd
    assert np.allclose(ns["data"].grad.to_numpy(), truth)
    assert out.count("all 8 elements agree with sympy") == 2
    if mode == "interp":
        assert "sample[0] was read, then changed" in out and "ewma[0] was read" not in out
