"""A non-finite gradient is an error only where the program uses it (tinyad/check/nonfinite.py):
the backward pass leaving a NaN shows its localized report as a warning; reading that gradient
in Python, or a kernel loading it (an optimiser step), raises it. The program is the DiffTaichi
jumper's pattern in small: a drag `sqrt` guarded by a `ti.select`, at rest at step 0, so the
gradients of the state and of an offset the program never reads are NaN (Taichi leaves them so
too), while the gradient it reads, the stiffness's, is finite and right. Both modes.
"""
import inspect
import math

import numpy as np
import pytest

import tinyad as ti
from tests.gradcheck import finite_difference
from tinyad.check.rules import NonFiniteGradientError

STEPS, N, DT = 4, 2, 0.1


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, line in enumerate(lines) if text in line)


class Jumper:
    """x[t + 1] = x[t] + dt (k - drag), drag = sqrt(x[t] - offset) where positive: x[0, 0] sits
    at the offset, so the drag's branch not taken has sqrt'(0) there (0 * inf = NaN in the
    gradients of x[0, 0] and offset[0]). loss = sum of x[STEPS] squared."""

    def __init__(self):
        self.k = ti.field(ti.f64, shape=(), needs_grad=True, name="k")
        self.offset = ti.field(ti.f64, shape=N, needs_grad=True, name="offset")
        self.x = ti.field(ti.f64, shape=(STEPS + 1, N), needs_grad=True, name="x")
        self.loss = ti.field(ti.f64, shape=(), needs_grad=True, name="loss")
        self.k[None] = 0.5
        self.x[0, 1] = 1.0          # x[0, 0] = offset[0] = 0: at rest
        k, offset, x, loss = self.k, self.offset, self.x, self.loss

        @ti.kernel
        def step(t: ti.i32):
            for i in range(N):
                gap = x[t, i] - offset[i]
                drag = ti.select(gap > 0.0, ti.sqrt(gap), 0.0)
                x[t + 1, i] = x[t, i] + DT * (k[None] - drag)

        @ti.kernel
        def total():
            for i in range(N):
                loss[None] += x[STEPS, i] ** 2

        @ti.kernel
        def descend(lr: ti.f64):       # an optimiser step on the unread offset: uses its .grad
            for i in offset:
                offset[i] -= lr * offset.grad[i]

        @ti.kernel
        def descend_k(lr: ti.f64):     # ... and on the stiffness, whose gradient is finite
            k[None] -= lr * k.grad[None]
        self.step, self.total, self.descend, self.descend_k = step, total, descend, descend_k

    def run(self):
        for t in range(STEPS):
            self.step(t)
        self.total()

    def run_loss(self) -> float:
        self.loss[None] = 0.0
        self.run()
        return self.loss[None]

    def backward(self):
        with ti.ad.Tape(self.loss):
            self.run()

    def is_located(self, report) -> bool:
        """The report names the adjoint statement's line and the select's (the cause)."""
        return (report.rule == "Non-finite gradient" and report.kernel == "step"
                and report.write.loc.line == _line_of(self.step.fn, "gap = x[t, i]")
                and report.earlier[0].loc.line == _line_of(self.step.fn, "drag = ti.select"))


def _nan_reports(text: str) -> int:
    return text.count("Non-finite gradient")


@pytest.fixture(params=["error", "warn"])
def check(request, mode):
    """Both modes, each with check="error" (the default) and check="warn"."""
    ti.init(mode=mode, default_fp=ti.f64, check=request.param)
    return request.param


def test_nan_only_in_unread_gradients_is_a_warning(check, capsys):
    jumper = Jumper()
    jumper.backward()
    grad_k = jumper.k.grad[None]            # the one gradient the program reads
    jumper.descend_k(0.0)                   # (a kernel loading it: finite, silent)
    shown = capsys.readouterr().err
    assert _nan_reports(shown) == 1 and "Non-finite gradient (warning)" in shown
    assert "sqrt'(0) = inf" in shown and "Not an error yet" in shown
    assert f"test_nonfinite_use.py:{_line_of(jumper.step.fn, 'drag = ti.select')}" in shown
    assert math.isfinite(grad_k)
    assert grad_k == pytest.approx(finite_difference(jumper.run_loss, jumper.k)[()], rel=1e-6)
    jumper.backward()                       # the next iteration: the same bug, not shown again
    assert _nan_reports(capsys.readouterr().err) == 0


def test_finite_elements_of_a_gradient_holding_nan_are_read_silently(check, capsys):
    jumper = Jumper()
    jumper.backward()
    capsys.readouterr()
    assert math.isfinite(jumper.offset.grad[1])          # offset[1]'s drag branch was taken
    assert math.isfinite(jumper.x.grad[STEPS, 0])
    assert _nan_reports(capsys.readouterr().err) == 0


def _used(check, use, capsys):
    """`use()` after the backward pass: raises the report in error mode; in warn mode it is
    shown (once) and the program goes on."""
    capsys.readouterr()
    if check == "error":
        with pytest.raises(NonFiniteGradientError) as caught:
            use()
        return caught.value.report
    use()
    shown = capsys.readouterr().err
    assert "Non-finite gradient: " in shown and "the program uses it" in shown
    use()                                   # (warn mode: a problem is shown once)
    assert "Non-finite" not in capsys.readouterr().err
    return None


@pytest.mark.parametrize("read", ["element", "to_numpy", "state"])
def test_reading_the_nan_gradient_in_python_raises(check, read, capsys):
    jumper = Jumper()
    jumper.backward()
    use = {"element": lambda: jumper.offset.grad[0], "to_numpy": jumper.offset.grad.to_numpy,
           "state": lambda: jumper.x.grad.to_numpy()}[read]
    report = _used(check, use, capsys)
    if report is None:
        return
    assert jumper.is_located(report)
    assert report.read.kernel is None and report.read.loc.file == __file__   # Python scope
    if read == "element":
        assert report.read.loc.line == _line_of(test_reading_the_nan_gradient_in_python_raises,
                                                '"element": lambda')
    assert "sqrt'(0) = inf" in str(report) and "the program uses it: Python scope" in str(report)


def test_a_kernel_loading_the_nan_gradient_raises(check, capsys):
    jumper = Jumper()
    jumper.backward()
    report = _used(check, lambda: jumper.descend(0.1), capsys)
    if report is None:
        return
    assert jumper.is_located(report)
    assert report.read.kernel == "descend"
    assert report.read.loc.line == _line_of(jumper.descend.fn, "offset.grad[i]")
    assert "the program uses it: kernel descend reads offset.grad[0] = nan" in str(report)


def test_cleared_gradients_owe_nothing(mode, capsys):
    jumper = Jumper()
    jumper.backward()
    jumper.offset.grad.fill(0)
    jumper.descend(0.1)                        # reads zeros now: nothing to report
    assert jumper.offset.grad.to_numpy().tolist() == [0.0, 0.0]
    jumper.x.grad.fill(0)
    assert np.all(jumper.x.grad.to_numpy() == 0)
    assert "Non-finite gradient: " not in capsys.readouterr().err


def test_check_nonfinite_false_is_silent(mode, capsys):
    ti.init(mode=mode, default_fp=ti.f64, check_nonfinite=False)
    jumper = Jumper()
    jumper.backward()
    assert math.isnan(jumper.offset.grad[0])              # Taichi's answer, without a word
    jumper.descend(0.1)
    assert math.isnan(jumper.offset[0])
    assert "Non-finite" not in capsys.readouterr().err
