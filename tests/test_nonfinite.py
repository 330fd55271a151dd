"""NaN and infinity in a gradient, localized (tinyad/check/nonfinite.py, interp/nanwatch.py): the
report names the derivative statement, the user's line, the element, the values and the cause;
each bad program has a clean twin that stays silent and whose gradient matches f64 finite
differences (or the analytic derivative where a difference would straddle a kink). Both modes.
"""
import inspect
import math

import numpy as np
import pytest

import tinyad as ti
from tests.gradcheck import finite_difference
from tinyad.check.rules import NonFiniteGradientError


def _line_of(fn, text: str) -> int:
    """The file line of the first line of `fn`'s source that contains `text`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, line in enumerate(lines) if text in line)


def _scalar_program(values, body):
    """x (with values), loss = sum over i of body(x[i]); -> (x, loss, kernel, run_loss)."""
    x = ti.field(ti.f64, shape=len(values), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.array(values))

    @ti.kernel
    def compute():
        for i in x:
            loss[None] += body(x[i])

    def run_loss():
        loss[None] = 0.0
        compute()
        return loss[None]
    return x, loss, compute, run_loss


def _gradient(x, loss, compute):
    with ti.ad.Tape(loss):
        compute()
    return x.grad.to_numpy()


def _caught(x, loss, compute) -> NonFiniteGradientError:
    with pytest.raises(NonFiniteGradientError) as caught:
        _gradient(x, loss, compute)
    return caught.value


# ---- the branch ti.select did not take ------------------------------------------------------

@ti.func
def _select_sqrt(v):
    return ti.select(v > 0, ti.sqrt(v), 0.0)


@ti.func
def _select_sqrt_guarded(v):
    return ti.select(v > 0, ti.sqrt(ti.max(v, 1e-12)), 0.0)


def test_select_untaken_sqrt_at_zero_is_0_times_inf(mode):
    x, loss, compute, _ = _scalar_program([1.0, 0.0, 4.0], _select_sqrt)
    error = _caught(x, loss, compute)
    report, text = error.report, str(error)
    assert report.rule == "Non-finite gradient" and report.kernel == "compute"
    assert report.field == "x.grad" and report.element == (1,)
    assert report.write.iteration == 1 and math.isnan(report.write.value)
    assert report.earlier[0].loc.line == _line_of(_select_sqrt, "ti.select")   # the cause
    assert report.write.loc.line == _line_of(compute.fn, "body(x[i])")   # x.grad's write
    assert "x.grad[1] became nan in the adjoint of compute" in text
    assert "0 * (sqrt'(0) = inf" in text and "ti.select did not take" in text
    assert "x.grad[" in report.write.kind        # the adjoint statement, as the IR prints it
    assert "ti.sqrt(ti.max(v, 1e-12))" in report.fix and "check_nonfinite=False" in report.fix
    assert report.earlier[0].kind == "cause" and math.isinf(report.earlier[0].value)


def test_select_guarded_twin_is_silent_and_right(mode):
    values = [1.0, 0.0, 4.0, -2.0]
    x, loss, compute, run_loss = _scalar_program(values, _select_sqrt_guarded)
    grad = _gradient(x, loss, compute)
    analytic = [0.5 / math.sqrt(v) if v > 0 else 0.0 for v in values]
    np.testing.assert_allclose(grad, analytic, rtol=1e-9)
    away_from_zero = [0, 2, 3]     # (a difference at 0 straddles the select's jump)
    np.testing.assert_allclose(grad[away_from_zero],
                               finite_difference(run_loss, x)[away_from_zero], rtol=1e-6)


@ti.func
def _select_exp(v):
    return ti.select(v < 50.0, ti.exp(v), 0.0)


@ti.func
def _select_exp_guarded(v):
    return ti.select(v < 50.0, ti.exp(ti.min(v, 50.0)), 0.0)


def test_select_untaken_exp_overflow(mode):
    x, loss, compute, _ = _scalar_program([1.0, 800.0], _select_exp)
    error = _caught(x, loss, compute)
    assert error.report.element == (1,)
    text = str(error)
    assert "exp(v) = inf at 800" in text and "ti.select did not take" in text
    assert "ti.exp(ti.min(v, 80.0))" in error.report.fix


def test_select_exp_guarded_twin(mode):
    x, loss, compute, run_loss = _scalar_program([1.0, 800.0, -3.0], _select_exp_guarded)
    grad = _gradient(x, loss, compute)
    np.testing.assert_allclose(grad, finite_difference(run_loss, x), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(grad, [math.e, 0.0, math.exp(-3.0)], rtol=1e-9)


# ---- sqrt'(0): the length of a zero vector ---------------------------------------------------

def _distance_program(eps: float, dtype=ti.f64):
    n = 3
    p = ti.Vector.field(2, dtype, shape=n, needs_grad=True)
    q = ti.Vector.field(2, dtype, shape=n, needs_grad=True)
    loss = ti.field(dtype, shape=(), needs_grad=True)
    p.from_numpy(np.array([[0.0, 0.0], [1.0, 2.0], [3.0, -1.0]]))
    q.from_numpy(np.array([[1.0, 1.0], [1.0, 2.0], [0.0, 0.0]]))   # p[1] == q[1]

    @ti.kernel
    def total_distance():
        for i in p:
            d = p[i] - q[i]
            loss[None] += ti.sqrt(d.dot(d) + eps)

    def run_loss():
        loss[None] = 0.0
        total_distance()
        return loss[None]
    return p, loss, total_distance, run_loss


def test_distance_of_a_zero_vector_names_sqrt_at_zero(mode):
    p, loss, total_distance, _ = _distance_program(0.0)
    error = _caught(p, loss, total_distance)
    report = error.report
    assert report.field == "p.grad" and report.element[0] == 1
    assert report.kernel == "total_distance"
    assert report.write.loc.line == _line_of(total_distance.fn, "d = p[i]")    # p.grad's write
    assert report.earlier[0].loc.line == _line_of(total_distance.fn, "ti.sqrt")   # the cause
    assert "sqrt'(0) = inf, the derivative of sqrt at 0" in str(error)
    assert "ti.select" not in report.summary
    assert "ti.sqrt(ti.max(" in report.fix and "guard the argument of sqrt" in report.fix


def test_distance_of_a_zero_vector_in_f32(mode):
    """An f32 gradient of a few floats (gravity's x.grad): fast mode's compiled look
    (compile/finite.py) finds it as the Python sum does in interp mode."""
    p, loss, total_distance, _ = _distance_program(0.0, ti.f32)
    report = _caught(p, loss, total_distance).report
    assert report.field == "p.grad" and report.element[0] == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_look_at_a_few_floats_misses_no_nan_or_infinity(dtype):
    """The look after a launch at a small gradient (tinyad/backend.py all_finite, one Python
    sum; fast mode's compiled loop, compile/finite.py): a NaN or an infinity anywhere, in any
    shape, is never called finite; the compiled look calls finite exactly what is, even where
    a sum of the values would overflow."""
    pytest.importorskip("numba")
    from tinyad.backend import Backend
    from tinyad.compile.finite import all_finite
    for shape in [(), (5,), (8, 2), (2, 3, 2)]:
        clean = np.linspace(-3, 3, math.prod(shape)).astype(dtype).reshape(shape)
        assert all_finite(clean) and Backend.all_finite(clean)
        for bad in (np.nan, np.inf, -np.inf):
            for k in range(clean.size):
                dirty = clean.copy()
                dirty.flat[k] = bad
                assert not all_finite(dirty) and not Backend.all_finite(dirty)
    assert all_finite(np.full(4, np.finfo(dtype).max, dtype))
    assert not all_finite(np.full((3, 4), np.nan, dtype)[:, 1])     # a strided view too


def test_distance_with_epsilon_twin(mode):
    p, loss, total_distance, run_loss = _distance_program(1e-12)
    grad = _gradient(p, loss, total_distance)
    np.testing.assert_allclose(grad, finite_difference(run_loss, p), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad[1], [0.0, 0.0])


# ---- log(0): the forward value itself is infinite --------------------------------------------

def test_log_of_zero(mode):
    x, loss, compute, _ = _scalar_program([2.0, 0.0], lambda v: ti.log(v))
    error = _caught(x, loss, compute)
    assert error.report.element == (1,)
    assert "log(x[i]) = -inf at 0" in str(error)     # (a Python lambda: inlined as written)
    assert "ti.log(ti.max(x[i], 1e-12))" in error.report.fix


def test_log1p_twin(mode):
    x, loss, compute, run_loss = _scalar_program([2.0, 0.0], lambda v: ti.log(v + 1.0))
    grad = _gradient(x, loss, compute)
    np.testing.assert_allclose(grad, finite_difference(run_loss, x), rtol=1e-6)
    np.testing.assert_allclose(grad, [1 / 3, 1.0], rtol=1e-9)


# ---- a NaN the forward pass made; several kernels in one Tape --------------------------------

def _two_kernels(values, first, second):
    """y = first(x) by kernel `make`, loss = sum of second(y) by kernel `reduce`."""
    x = ti.field(ti.f64, shape=len(values), needs_grad=True)
    y = ti.field(ti.f64, shape=len(values), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.array(values))

    @ti.kernel
    def make():
        for i in x:
            y[i] = first(x[i])

    @ti.kernel
    def reduce():
        for i in y:
            loss[None] += second(y[i])

    def run():
        make()
        reduce()

    def run_loss():
        loss[None] = 0.0
        run()
        return loss[None]
    return x, loss, run, run_loss, make


def test_nan_from_the_primal_says_so_and_where_it_was_written(mode, capsys):
    x, loss, run, _, make = _two_kernels([1.0, 4.0, -1.0], lambda v: ti.sqrt(v),
                                         lambda v: v * v)
    error = _caught(x, loss, run)
    # reduce's adjoint meets y[2] = nan first: a warning, as nothing reads y.grad (make's
    # adjoint zeroes it: y[i] = ... is an overwrite)
    shown = capsys.readouterr().err
    assert "Non-finite gradient (warning): y.grad[2] became nan in the adjoint of reduce" in shown
    assert "the primal value y[2] is already nan" in shown
    assert f"last written by make, line {_line_of(make.fn, 'y[i] = ')}" in shown
    # reading x.grad raises make's own: its adjoint takes sqrt'(-1)
    report = error.report
    assert report.kernel == "make" and report.field == "x.grad" and report.element == (2,)
    assert "sqrt(x[i]) = nan at -1" in str(error) and "the forward pass computes" in str(error)


def test_finite_primal_twin(mode):
    x, loss, run, run_loss, _ = _two_kernels([1.0, 4.0, 9.0], lambda v: ti.sqrt(v),
                                             lambda v: v * v)
    grad = _gradient(x, loss, run)
    np.testing.assert_allclose(grad, finite_difference(run_loss, x), rtol=1e-6)
    np.testing.assert_allclose(grad, [1.0, 1.0, 1.0], rtol=1e-9)


@pytest.mark.parametrize("bad", ["make", "reduce"])
def test_tape_names_the_kernel_whose_adjoint_made_it(mode, bad):
    risky = lambda v: ti.select(v > 0, ti.sqrt(v), 0.0)
    plain = lambda v: 2.0 * v
    x, loss, run, _, _ = (_two_kernels([0.0, 1.0], risky, plain) if bad == "make"
                          else _two_kernels([0.0, 1.0], plain, risky))
    error = _caught(x, loss, run)
    assert error.report.kernel == bad
    assert error.report.field == ("x.grad" if bad == "make" else "y.grad")
    assert f"in the adjoint of {bad}:" in str(error) and "ti.select did not take" in str(error)


def test_tape_of_guarded_kernels_twin(mode):
    guarded = lambda v: ti.select(v > 0, ti.sqrt(ti.max(v, 1e-12)), 0.0)
    x, loss, run, run_loss, _ = _two_kernels([0.25, 1.0, -1.0], guarded, lambda v: 2.0 * v)
    grad = _gradient(x, loss, run)
    np.testing.assert_allclose(grad, finite_difference(run_loss, x), rtol=1e-6, atol=1e-9)


# ---- the way out, warn mode, forward mode ----------------------------------------------------

def test_check_nonfinite_false_lets_an_intended_nan_through(mode):
    ti.init(mode=mode, default_fp=ti.f64, check_nonfinite=False)
    x, loss, compute, _ = _scalar_program([1.0, 0.0], _select_sqrt)
    grad = _gradient(x, loss, compute)         # Taichi's answer: NaN, without a word
    assert grad[0] == 0.5 and math.isnan(grad[1])


def test_warn_mode_shows_it_once_and_goes_on(mode, capsys):
    ti.init(mode=mode, default_fp=ti.f64, check="warn")
    x, loss, compute, _ = _scalar_program([1.0, 0.0, 0.0], _select_sqrt)
    for _ in range(2):
        grad = _gradient(x, loss, compute)
    assert math.isnan(grad[1]) and math.isnan(grad[2])
    shown = capsys.readouterr().err
    # warn mode: a problem is shown once: as the backward pass leaves it, and where it is used
    assert shown.count("Non-finite gradient (warning): x.grad[1] became nan") == 1
    assert shown.count("Non-finite gradient: x.grad[1] became nan") == 1


def _forward_distance(eps: float):
    p = ti.Vector.field(2, ti.f64, shape=2, needs_grad=True, needs_dual=True)
    dist = ti.field(ti.f64, shape=2, needs_grad=True, needs_dual=True)
    p.from_numpy(np.array([[3.0, 4.0], [0.0, 0.0]]))

    @ti.kernel
    def lengths():
        for i in p:
            dist[i] = ti.sqrt(p[i].dot(p[i]) + eps)
    return p, dist, lengths


def test_forward_mode_length_of_a_zero_vector(mode):
    p, dist, lengths = _forward_distance(0.0)
    with pytest.raises(NonFiniteGradientError) as caught, \
            ti.ad.FwdMode(loss=dist, param=p, seed=[1.0, 1.0, 1.0, 1.0]):
        lengths()
    report = caught.value.report
    assert report.rule == "Non-finite tangent" and report.field == "dist.dual"
    assert report.element == (1,) and math.isnan(report.write.value)
    assert "sqrt'(0) = inf" in str(caught.value)


def test_forward_mode_guarded_twin(mode):
    p, dist, lengths = _forward_distance(1e-12)
    with ti.ad.FwdMode(loss=dist, param=p, seed=[1.0, 1.0, 1.0, 1.0]):
        lengths()
    tangent = dist.dual.to_numpy()
    base = p.to_numpy()
    step = 1e-6
    expected = [(np.sqrt(((base[i] + step) ** 2).sum() + 1e-12)
                 - np.sqrt(((base[i] - step) ** 2).sum() + 1e-12)) / (2 * step) for i in range(2)]
    np.testing.assert_allclose(tangent, expected, rtol=1e-6, atol=1e-9)
    assert tangent[1] == 0.0


def test_time_indexed_field_is_checked_where_each_step_adds(mode):
    """Each step's adjoint looks at the rows its forward read (not the whole history): the NaN
    step 2 makes (x[2, 1] = 0, sqrt'(0)) is found in step 2's adjoint, in x.grad[2, 1]."""
    steps, width = 4, 1 << 15     # (large enough that only the rows a step read are looked at)
    x = ti.field(ti.f64, shape=(steps + 1, width), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(2):
            if t == 2:
                x[t + 1, i] = ti.sqrt(x[t, i])
            else:
                x[t + 1, i] = x[t, i] - 1.0

    @ti.kernel
    def total():
        for i in range(2):
            loss[None] += x[steps, i]

    start = np.zeros((steps + 1, width))
    start[0, :2] = [4.0, 2.0]        # x[2, :2] = [2, 0]
    x.from_numpy(start)
    with ti.ad.Tape(loss):
        for t in range(steps):
            step(t)
        total()
    with pytest.raises(NonFiniteGradientError) as caught:
        x.grad.to_numpy()
    assert caught.value.report.kernel == "step" and caught.value.report.element == (2, 1)
    assert "sqrt'(0) = inf" in str(caught.value)


def test_manual_sweep_and_a_nan_the_same_kernel_computes_forward(mode):
    """kernel.grad() by hand, no Tape; sqrt(-1) in the forward value itself (taken, no select):
    the report says the forward pass computes it."""
    x, loss, compute, _ = _scalar_program([4.0, -1.0], lambda v: ti.sqrt(v))
    compute()
    assert math.isnan(loss[None])
    loss.grad[None] = 1.0
    compute.grad()                 # (a warning: nothing has used x.grad yet)
    with pytest.raises(NonFiniteGradientError) as caught:
        x.grad.to_numpy()
    text = str(caught.value)
    assert caught.value.report.element == (1,)
    assert "sqrt(x[i]) = nan at -1" in text and "the forward pass computes this value" in text


def test_manual_sweep_twin(mode):
    x, loss, compute, run_loss = _scalar_program([4.0, 1.0], lambda v: ti.sqrt(v))
    compute()
    loss.grad[None] = 1.0
    compute.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), finite_difference(run_loss, x), rtol=1e-6)
    np.testing.assert_allclose(x.grad.to_numpy(), [0.25, 0.5], rtol=1e-9)


def test_a_failed_rerun_still_reports_the_element(mode, monkeypatch):
    """The locator is a re-run: if it fails, the detection is still reported, without the
    line, and no internal error reaches the user."""
    def broken(*args):
        raise RuntimeError("the locator broke")
    if mode == "interp":
        monkeypatch.setattr("tinyad.interp.backend.locate", broken)
    else:
        from tinyad.runtime import runtime
        monkeypatch.setattr(runtime.backend, "nonfinite_locator", broken)
    x, loss, compute, _ = _scalar_program([1.0, 0.0], _select_sqrt)
    error = _caught(x, loss, compute)
    assert error.report.element == (1,) and error.report.write is None
    assert "not located" in str(error) and "the locator broke" in str(error)


def test_tape_that_cannot_run_again_is_checked_launch_by_launch(mode):
    """Tape(clear_gradients=False) keeps what the gradients held: its backward cannot be run
    again from a state rebuilt without a copy, so each launch is looked at as it runs."""
    risky = lambda v: ti.select(v > 0, ti.sqrt(v), 0.0)
    x, loss, run, _, _ = _two_kernels([1.0, 0.0], risky, lambda v: 3.0 * v)
    with ti.ad.Tape(loss, clear_gradients=False):
        run()
    with pytest.raises(NonFiniteGradientError) as caught:
        x.grad[1]
    assert caught.value.report.kernel == "make" and caught.value.report.element == (1,)
