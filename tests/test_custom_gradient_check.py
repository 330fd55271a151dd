"""Custom gradients checked automatically (tinyad/customcheck.py): under a Tape with the rule
checks on, each grad_replaced / grad_for pair is compared once per call site with central
finite differences of its primal (the dot-product test). Each wrong custom gradient is caught
with a report naming it, its line, both numbers and the fix; each clean twin stays silent and
its final gradient equals f64 finite differences of the whole program."""
from __future__ import annotations

import numpy as np
import pytest

import tinyad as ti
from tests.gradcheck import finite_difference
from tinyad import customcheck

X0 = np.array([0.5, -1.5, 2.0, 0.25])


def _pair(power_factor=3.0, dropped_term=False, dtype=ti.f64):
    """loss = sum(x^3 + sin x) through a grad_replaced function and a hand-written gradient
    kernel; `power_factor` 3 and no dropped term make it right."""
    x = ti.field(dtype, shape=len(X0), needs_grad=True)
    loss = ti.field(dtype, shape=(), needs_grad=True)
    calls = {"grad": 0}

    @ti.kernel
    def cubes_and_sines():
        for i in x:
            loss[None] += x[i] ** 3 + ti.sin(x[i])

    @ti.kernel
    def cubes_and_sines_grad():
        for i in x:
            d = power_factor * x[i] ** 2
            if ti.static(not dropped_term):
                d += ti.cos(x[i])
            x.grad[i] += d * loss.grad[None]

    @ti.ad.grad_replaced
    def forward():
        cubes_and_sines()

    @ti.ad.grad_for(forward)
    def backward():
        calls["grad"] += 1
        cubes_and_sines_grad()

    x.from_numpy(X0.astype(dtype.np))
    return x, loss, forward, calls


def _true_gradient():
    return 3 * X0 ** 2 + np.cos(X0)


@pytest.mark.parametrize("fault", ["wrong constant", "dropped term"])
def test_a_wrong_custom_gradient_is_caught_by_name_line_and_numbers(mode, fault):
    _, loss, forward, _ = _pair(power_factor=2.0 if fault == "wrong constant" else 3.0,
                                dropped_term=fault == "dropped term")
    with pytest.raises(ti.CustomGradientRuleError) as caught:
        with ti.ad.Tape(loss):
            forward()   # the call site the report names
    report = caught.value.report
    text = str(caught.value)
    assert report.rule == "Custom gradient mismatch"
    assert "the custom gradient backward is not the derivative of forward" in text
    assert [a.kind for a in report.earlier] == ["call", "primal", "gradient"]
    assert report.earlier[0].loc.text.strip() == "forward()   # the call site the report names"
    assert report.earlier[1].loc.text.strip() == "def forward():"
    assert report.earlier[2].loc.text.strip() == "def backward():"
    assert "v random in [-1, 1] on forward's inputs (x (all 4))" in text
    assert "w random in [-1, 1] on its outputs (loss)" in text
    numbers = [float(s) for s in report.summary.rsplit("give ", 1)[1].rstrip(".").split(" and "
               "backward gives ")]
    assert numbers[0] != pytest.approx(numbers[1], rel=1e-6)
    assert "@ti.ad.grad_for(forward, check=False)" in report.fix
    assert "ti.init(check='off')" in report.fix
    assert isinstance(caught.value, ti.AutodiffRuleError)


def test_a_correct_custom_gradient_is_silent_and_right(mode, capsys):
    x, loss, forward, calls = _pair()
    checked = customcheck.stats["checked"]
    with ti.ad.Tape(loss):
        forward()
    assert customcheck.stats["checked"] == checked + 1      # it was tested, and passed
    assert calls["grad"] == 2                              # once alone, once for real
    assert capsys.readouterr().err == ""

    def run_loss():
        loss[None] = 0.0
        forward()
        return loss[None]
    fd = finite_difference(run_loss, x)
    np.testing.assert_allclose(x.grad.to_numpy(), _true_gradient(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), fd, rtol=1e-8)


def test_the_check_can_be_turned_off_for_one_pair(mode):
    x, loss, forward, calls = _pair(power_factor=2.0)
    checked = customcheck.stats["checked"]
    ti.ad.grad_for(forward, check=False)(forward.grad)
    with ti.ad.Tape(loss):
        forward()
    assert customcheck.stats["checked"] == checked and calls["grad"] == 1
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * X0 ** 2 + np.cos(X0), rtol=1e-12)


def test_an_f32_program_is_checked_with_a_looser_tolerance(f32_mode):
    x, loss, forward, _ = _pair(power_factor=2.0, dtype=ti.f32)
    with pytest.raises(ti.CustomGradientRuleError, match="the program runs in f32"):
        with ti.ad.Tape(loss):
            forward()
    x, loss, forward, _ = _pair(dtype=ti.f32)
    with ti.ad.Tape(loss):
        forward()
    np.testing.assert_allclose(x.grad.to_numpy(), _true_gradient(), rtol=1e-5)


def test_warn_mode_shows_the_report_and_goes_on(mode, capsys):
    ti.init(mode=mode, default_fp=ti.f64, check="warn")
    x, loss, forward, _ = _pair(power_factor=2.0)
    with ti.ad.Tape(loss):
        forward()
    assert "Custom gradient mismatch" in capsys.readouterr().err
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * X0 ** 2 + np.cos(X0), rtol=1e-12)


# ---- checkpointing: a segment that recomputes its forward and chains the adjoints by hand ------

N, STEPS, DT = 4, 6, 0.1
START = 0.5 + 0.25 * np.arange(N)


def _checkpointed(chain_all: bool, steps: int = STEPS):
    """x_(t+1) = x_t (1 + dt sin x_t) through one scratch field, checkpointed per step; the
    gradient clears and recomputes the scratch, then chains advance's adjoint and (if
    `chain_all`) compute_force's. Without it, no rule of the checker sees a fault: each
    adjoint reads what its forward read, and the scratch's gradient is cleared each step."""
    x = ti.field(ti.f64, shape=(steps + 1, N), needs_grad=True)
    force = ti.field(ti.f64, shape=N, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    calls = {"grad": 0}

    @ti.kernel
    def clear_force():             # (the scratch and its gradient, as difftaichi's grids)
        for i in range(N):
            force[i] = 0.0
            force.grad[i] = 0.0

    @ti.kernel
    def compute_force(t: ti.i32):
        for i in range(N):
            force[i] += ti.sin(x[t, i])

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(N):
            x[t + 1, i] = x[t, i] * (1 + DT * force[i])

    @ti.kernel
    def compute_loss():
        for i in range(N):
            loss[None] += x[steps, i] ** 2

    @ti.ad.grad_replaced
    def step(t):
        clear_force()
        compute_force(t)
        advance(t)

    @ti.ad.grad_for(step)
    def step_grad(t):
        calls["grad"] += 1
        clear_force()
        compute_force(t)             # recompute the scratch, then chain the adjoints
        advance.grad(t)
        if chain_all:
            compute_force.grad(t)

    def run():
        x.from_numpy(np.vstack([START, np.zeros((steps, N))]))
        with ti.ad.Tape(loss=loss):
            for t in range(steps):
                step(t)
            compute_loss()
        return x.grad.to_numpy()[0]
    return run, calls, (x, force, loss)


def _true_checkpointed_gradient():
    def loss(x0):
        xs = x0.copy()
        for _ in range(STEPS):
            xs = xs * (1 + DT * np.sin(xs))
        return (xs ** 2).sum()
    h = 1e-6
    return np.array([(loss(START + h * e) - loss(START - h * e)) / (2 * h) for e in np.eye(N)])


def test_a_checkpoint_that_chains_only_some_adjoints_is_caught(mode):
    run, _, _ = _checkpointed(chain_all=False)
    with pytest.raises(ti.CustomGradientRuleError) as caught:
        run()
    text = str(caught.value)
    assert "the custom gradient step_grad is not the derivative of step" in text
    assert "step(t)" in text                       # the call site, in the loop
    assert "on step's inputs (4 of x's 28 elements (from x[0, 0]))" in text
    assert "on its outputs (4 of x's 28 elements (from x[1, 0]))" in text


def test_a_checkpoint_that_chains_every_adjoint_is_silent_and_right(mode):
    run, _, _ = _checkpointed(chain_all=True)
    np.testing.assert_allclose(run(), _true_checkpointed_gradient(), rtol=1e-7)


def test_the_check_runs_once_per_call_site(mode):
    """A loop calling the step from one line pays once: the custom gradient runs once alone
    (the test) plus once per step; a second call site is a second test."""
    run, calls, _ = _checkpointed(chain_all=True, steps=100)
    checked = customcheck.stats["checked"]
    run()
    assert calls["grad"] == 100 + 1
    assert customcheck.stats["checked"] == checked + 1
    calls["grad"] = 0
    run()                                          # the same line again: not tested again
    assert calls["grad"] == 100 and customcheck.stats["checked"] == checked + 1


def test_the_check_leaves_the_users_fields_as_they_would_be_without_it(mode):
    """Every field value and gradient after the Tape is what it is with the check off."""
    results = []
    for check in (True, False):
        ti.init(mode=mode, default_fp=ti.f64)
        run, calls, fields = _checkpointed(chain_all=True)
        if check:
            run()
        else:
            with customcheck.standing_aside():
                run()
        assert calls["grad"] == STEPS + check
        results.append([a for f in fields for a in (f.to_numpy(), f.grad.to_numpy())])
    for checked, unchecked in zip(*results):
        np.testing.assert_array_equal(checked, unchecked)


def test_where_it_cannot_judge_the_check_stands_aside(mode, capsys):
    """A primal that writes a field from Python (the replay of its kernels cannot reproduce
    it) and one that draws ti.random(): both custom gradients are right, and nothing is said
    (a finite difference of the kernels alone would be wrong here)."""
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    scale = ti.field(ti.f64, shape=(), needs_grad=True)
    noise = ti.field(ti.f64, shape=3)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def scaled_squares():
        for i in x:
            loss[None] += scale[None] * x[i] ** 2 + noise[i] * x[i]

    @ti.kernel
    def scaled_squares_grad():
        for i in x:
            x.grad[i] += (2 * scale[None] * x[i] + noise[i]) * loss.grad[None]

    @ti.kernel
    def draw():
        for i in noise:
            noise[i] = ti.random()

    @ti.ad.grad_replaced
    def from_python():
        scale[None] = 3.0          # a Python-scope write inside the primal
        scaled_squares()

    @ti.ad.grad_replaced
    def with_random():
        draw()
        scaled_squares()

    for primal in (from_python, with_random):
        ti.ad.grad_for(primal)(scaled_squares_grad)
    x.from_numpy(X0[:3])
    scale[None] = 1.0
    checked = customcheck.stats["checked"]
    for primal in (from_python, with_random):
        with ti.ad.Tape(loss):
            primal()
        np.testing.assert_allclose(x.grad.to_numpy(), 6 * X0[:3] + noise.to_numpy(),
                                   rtol=1e-12)
    assert customcheck.stats["checked"] == checked
    assert capsys.readouterr().err == ""
