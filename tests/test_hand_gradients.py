"""Gradient kernels written by hand, compared with tinyad's own adjoint (tinyad/check/handgrads.py).

A kernel that reads y.grad and adds to x.grad, run in place of a kernel's .grad(), is matched to
the forward launch it undoes; where tinyad can differentiate that launch, its adjoint runs on
copies and the two must agree. A wrong constant and a dropped term are caught, naming both
kernels, the element and both values; a correct one (accumulating or assigning, f64 or f32)
stays silent and its gradient equals f64 finite differences; so does one whose forward kernel
tinyad cannot differentiate, and a DiffTaichi-style sweep mixing k.grad() and a hand-written
adjoint. The check leaves every field as it was."""
from __future__ import annotations

import numpy as np
import pytest

import tinyad as ti
from tests.gradcheck import finite_difference

X0 = np.array([0.5, -1.5, 2.0, 0.25])


def _true_gradient():
    """d/dx of sum(0.5 * (x^3 + sin x)^2)."""
    y = X0 ** 3 + np.sin(X0)
    return y * (3 * X0 ** 2 + np.cos(X0))


def _program(constant=3.0, dropped_term=False, assigns=False, dtype=ti.f64, between=None):
    """y = x^3 + sin x by `stage`; loss = sum(y^2) / 2; `stage_grad` is stage's adjoint by hand
    (right with constant 3 and no term dropped); `between(y)` runs before it in the sweep."""
    x = ti.field(dtype, shape=len(X0), needs_grad=True)
    y = ti.field(dtype, shape=len(X0), needs_grad=True)
    loss = ti.field(dtype, shape=(), needs_grad=True)

    @ti.kernel
    def stage():
        for i in x:
            y[i] = x[i] ** 3 + ti.sin(x[i])

    @ti.kernel
    def total():
        for i in y:
            loss[None] += 0.5 * y[i] ** 2

    @ti.kernel
    def stage_grad():
        for i in x:
            d = constant * x[i] ** 2
            if ti.static(not dropped_term):
                d += ti.cos(x[i])
            if ti.static(assigns):
                x.grad[i] = d * y.grad[i]
            else:
                x.grad[i] += d * y.grad[i]

    def run_loss():
        loss[None] = 0
        stage()
        total()
        return loss[None]

    def sweep():
        """The forward pass, then the backward pass by hand: total.grad(), then stage_grad."""
        run_loss()
        loss.grad[None] = 1
        total.grad()
        if between is not None:
            between(y)
        stage_grad()

    x.from_numpy(X0.astype(dtype.np))
    return x, y, loss, stage_grad, sweep, run_loss


@pytest.mark.parametrize("fault", ["wrong constant", "dropped term"])
def test_a_wrong_hand_written_adjoint_is_caught(mode, fault):
    _, _, _, _, sweep, _ = _program(constant=2.0 if fault == "wrong constant" else 3.0,
                                    dropped_term=fault == "dropped term")
    with pytest.raises(ti.CustomGradientRuleError) as caught:
        sweep()
    report = caught.value.report
    text = str(caught.value)
    assert report.rule == "Hand-written gradient mismatch"
    assert report.kernel == "stage_grad" and report.field == "x.grad" and report.element == (0,)
    assert "not the derivative of stage" in text
    # the hand-written kernel's line, the forward kernel's, and both values
    call, forward = report.earlier
    assert report.write.loc.line > forward.loc.line and forward.kernel == "stage"
    assert call.kind == "call" and "stage_grad()" in call.loc.snippet()
    assert "x.grad[i] = d * y.grad[i]" not in text and "x.grad[i] += d * y.grad[i]" in text
    assert f"{_true_gradient()[0]:.9g}" in text
    wrong = (2 * X0[0] ** 2 + np.cos(X0[0]) if fault == "wrong constant"
             else 3 * X0[0] ** 2) * (X0[0] ** 3 + np.sin(X0[0]))
    assert f"{wrong:.9g}" in text and "ti.ad.trust(stage_grad)" in text


@pytest.mark.parametrize("assigns", [False, True], ids=["accumulates", "assigns"])
def test_a_correct_hand_written_adjoint_is_silent_and_right(mode, assigns, capsys):
    x, _, _, _, sweep, run_loss = _program(assigns=assigns)
    sweep()
    assert capsys.readouterr().err == ""
    grad = x.grad.to_numpy()
    np.testing.assert_allclose(grad, _true_gradient(), rtol=1e-10)
    np.testing.assert_allclose(grad, finite_difference(run_loss, x), rtol=1e-6)


def test_in_f32_rounding_is_not_a_mismatch_but_a_wrong_constant_is(f32_mode):
    x, _, _, _, sweep, _ = _program(dtype=ti.f32)
    sweep()
    np.testing.assert_allclose(x.grad.to_numpy(), _true_gradient(), rtol=1e-5)
    _, _, _, _, sweep, _ = _program(constant=2.9, dtype=ti.f32)
    with pytest.raises(ti.CustomGradientRuleError):
        sweep()


def test_the_check_leaves_every_field_as_it_was(mode):
    """Without checks and with them, every value and gradient ends the same."""
    ends = []
    for check in ("off", "error"):
        ti.init(mode=mode, default_fp=ti.f64, check=check)
        x, y, loss, _, sweep, _ = _program()
        sweep()
        ends.append([f.to_numpy() for f in (x, y, loss, x.grad, y.grad, loss.grad)])
    for off, on in zip(*ends):
        np.testing.assert_array_equal(off, on)


def test_trust_opts_a_kernel_out(mode):
    x, _, _, stage_grad, sweep, _ = _program(constant=2.0)
    assert ti.ad.trust(stage_grad) is stage_grad
    sweep()      # (a surrogate gradient, meant to differ)
    assert not np.allclose(x.grad.to_numpy(), _true_gradient())
    with pytest.raises(ti.TinyadError, match="ti.ad.trust takes a @ti.kernel"):
        ti.ad.trust(lambda: None)


def test_trust_is_the_kernel_objects_not_its_names(mode):
    """Trusting one kernel leaves another of the same name and line (a factory's next one)
    compared: trust by name leaked into every later test of this file in the same process.
    A kernel traced before ti.ad.trust is trusted too."""
    _, _, _, stage_grad, sweep, _ = _program(constant=2.0)
    ti.ad.trust(stage_grad)
    sweep()
    _, _, _, traced_first, sweep_traced_first, _ = _program(constant=2.0)
    assert traced_first.ir is not None     # (traced now, before it is trusted)
    ti.ad.trust(traced_first)
    sweep_traced_first()
    _, _, _, _, other_sweep, _ = _program(constant=2.0)
    with pytest.raises(ti.CustomGradientRuleError):
        other_sweep()


def test_a_forward_kernel_tinyad_cannot_differentiate_is_left_to_the_user(mode, capsys):
    """A compaction (y[k] = x[i]^3 for the x[i] above a threshold, k from an atomic counter):
    reverse mode refuses to replay an atomic's result, so the hand-written adjoint, through the
    indices it kept, is what users write, and it is not compared."""
    n = len(X0)
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)
    kept = ti.field(ti.i32, shape=n)
    count = ti.field(ti.i32, shape=())
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compact():
        for i in x:
            if x[i] > 0.3:
                k = ti.atomic_add(count[None], 1)
                kept[k] = i
                y[k] = x[i] ** 3

    @ti.kernel
    def total():
        for k in range(count[None]):
            loss[None] += y[k] * y[k]

    @ti.kernel
    def compact_grad():
        for k in range(count[None]):
            x.grad[kept[k]] += 3 * x[kept[k]] ** 2 * y.grad[k]

    def run_loss():
        loss[None] = 0
        count[None] = 0
        compact()
        total()
        return loss[None]

    x.from_numpy(np.abs(X0))
    run_loss()
    with pytest.raises(ti.KernelSimplicityRuleError):
        compact.grad()          # (what the hand-written kernel stands in for)
    loss.grad[None] = 1
    total.grad()
    compact_grad()
    assert capsys.readouterr().err == ""
    a = np.abs(X0)
    truth = np.where(a > 0.3, 6 * a ** 5, 0)          # d/dx (x^3)^2
    np.testing.assert_allclose(x.grad.to_numpy(), truth, rtol=1e-10)
    np.testing.assert_allclose(x.grad.to_numpy(), finite_difference(run_loss, x), rtol=1e-6)


STEPS = 3


def _difftaichi_sweep(constant, skip_grow=False):
    """x[t+1] = tanh(v[t]) with v[t] = 2 x[t]^2 + 1: `squash`'s adjoint by hand, `grow`'s by
    grow.grad() (skipped at t = 0 with `skip_grow`), in a reverse sweep over time steps;
    loss = sum(x[STEPS])."""
    x = ti.field(ti.f64, shape=(STEPS + 1, len(X0)), needs_grad=True)
    v = ti.field(ti.f64, shape=(STEPS, len(X0)), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def grow(t: ti.i32):
        for i in range(len(X0)):
            v[t, i] = 2 * x[t, i] ** 2 + 1

    @ti.kernel
    def squash(t: ti.i32):
        for i in range(len(X0)):
            x[t + 1, i] = ti.tanh(v[t, i])

    @ti.kernel
    def squash_grad(t: ti.i32):
        for i in range(len(X0)):
            th = ti.tanh(v[t, i])
            v.grad[t, i] += constant * (1 - th * th) * x.grad[t + 1, i]

    @ti.kernel
    def total():
        for i in range(len(X0)):
            loss[None] += x[STEPS, i]

    def run_loss():
        loss[None] = 0
        for t in range(STEPS):
            grow(t)
            squash(t)
        total()
        return loss[None]

    x.from_numpy(np.stack([0.3 * X0] + [np.zeros(len(X0))] * STEPS))
    run_loss()
    loss.grad[None] = 1
    total.grad()
    for t in reversed(range(STEPS)):
        squash_grad(t)
        if t or not skip_grow:
            grow.grad(t)
    return x, run_loss


def test_a_difftaichi_sweep_mixing_grad_and_a_hand_written_adjoint(mode, capsys):
    x, run_loss = _difftaichi_sweep(1.0)
    fd = finite_difference(run_loss, x)      # (writes x, the parameter: the sweep is over)
    assert capsys.readouterr().err == ""
    np.testing.assert_allclose(x.grad.to_numpy()[0], fd[0], rtol=1e-6)
    ti.init(mode=mode, default_fp=ti.f64)
    with pytest.raises(ti.CustomGradientRuleError, match="squash_grad.*not the derivative of "
                                                         "squash"):
        _difftaichi_sweep(0.5)


def test_a_hand_written_adjoint_takes_part_in_the_sweep_check(mode, capsys):
    """The hand-written adjoint stands for squash.grad(): a sweep that then skips grow.grad()
    at the first step is told, when x.grad is used, as it would be with squash.grad()."""
    x, _ = _difftaichi_sweep(1.0, skip_grow=True)
    x.from_numpy(x.to_numpy() - 0.1 * x.grad.to_numpy())
    err = capsys.readouterr().err
    assert "Adjoint skipped (warning)" in err and "grow.grad() (forward launch #1" in err


def test_a_kernel_that_clips_a_gradient_in_place_is_no_adjoint(mode, capsys):
    """Clipping y.grad between two adjoints reads and writes the same gradient: it undoes no
    forward launch, so it is not compared (nor reported)."""
    @ti.kernel
    def clip(y: ti.template()):
        for i in y:
            y.grad[i] = ti.min(y.grad[i], 1.0)

    x, _, _, _, sweep, _ = _program(between=clip)
    sweep()
    assert capsys.readouterr().err == ""
    y = X0 ** 3 + np.sin(X0)
    np.testing.assert_allclose(x.grad.to_numpy(), np.minimum(y, 1.0) * (3 * X0 ** 2 + np.cos(X0)),
                               rtol=1e-10)
