"""A hand-written backward pass (kernel.grad() calls outside a Tape) that skips an adjoint
(tinyad/check/sweeps.py): each bad version warned of, naming the skipped kernel's line, the
read's line and the fix; each correct sweep silent, with a gradient that matches f64 finite
differences. Taichi 1.7.4 returns the truncated gradients here without a word."""
import numpy as np
import pytest

import tinyad as ti
from tests.gradcheck import finite_difference
from tests.markers import marked_lines

N, STEPS, DT = 3, 4, 0.1
START = np.array([0.3, -0.5, 1.1])
SKIPPED = "Adjoint skipped (warning)"


def _line_of(marker: str) -> str:
    return f"test_manual_sweeps.py:{_LINES[marker]}"


_LINES = marked_lines(__file__)


def _silent(capsys):
    err = capsys.readouterr().err
    assert "warning" not in err.lower() and "Rule" not in err, err


# ---- a chain of three kernels: x -> y -> z -> loss -----------------------------------------

@pytest.fixture
def chain(mode):
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)
    z = ti.field(ti.f64, shape=N, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def squash():
        for i in x:
            y[i] = ti.sin(x[i])  # <squash>

    @ti.kernel
    def scale():
        for i in y:
            z[i] = 2 * y[i] + y[i] ** 2  # <scale>

    @ti.kernel
    def total():
        for i in z:
            loss[None] += z[i] ** 2

    x.from_numpy(START)

    def forward():
        loss[None] = 0.0
        squash()
        scale()
        total()
        return loss[None]
    return x, z, loss, (squash, scale, total), forward


def test_a_sweep_that_skips_the_first_adjoint_is_reported(chain, capsys):
    x, _, loss, (_, scale, total), forward = chain
    truth = finite_difference(forward, x)
    forward()
    loss.grad[None] = 1.0
    total.grad()
    scale.grad()
    got = x.grad.to_numpy()  # <read-a>
    assert SKIPPED not in capsys.readouterr().err   # (a look mid-sweep would be fine)
    x.from_numpy(START - 0.1 * got)                 # the optimiser step uses it
    err = capsys.readouterr().err
    assert SKIPPED in err
    assert "scale.grad() passed a gradient to y, but squash.grad()" in err
    assert _line_of("squash") in err and _line_of("read-a") in err
    assert "call squash.grad() after scale.grad(), before reading x.grad" in err
    assert not got.any()                                   # what Taichi returns
    assert np.abs(truth).max() > 1


def test_a_look_mid_sweep_then_the_rest_of_the_sweep_is_silent(chain, capsys):
    x, _, loss, (squash, scale, total), forward = chain
    truth = finite_difference(forward, x)
    forward()
    loss.grad[None] = 1.0
    total.grad()
    scale.grad()
    partial = x.grad.to_numpy()
    squash.grad()
    got = x.grad.to_numpy()
    x.from_numpy(START - 0.1 * got)
    _silent(capsys)
    assert not partial.any()
    np.testing.assert_allclose(got, truth, rtol=1e-6)


def test_a_sweep_that_stops_early_names_the_first_adjoint_missing(chain, capsys):
    x, _, loss, (_, _, total), forward = chain
    forward()
    loss.grad[None] = 1.0
    total.grad()
    x.grad.to_numpy()
    ti.ad.clear_all_gradients()            # done with this gradient
    err = capsys.readouterr().err
    assert SKIPPED in err and "but scale.grad()" in err
    assert _line_of("scale") in err
    assert "flows back through scale and the 1 launch before it" in err


def test_a_step_kernel_reading_the_truncated_gradient_is_reported(chain, capsys):
    x, _, loss, (_, scale, total), forward = chain

    @ti.kernel
    def descend():
        for i in x:
            x[i] -= 0.1 * x.grad[i]  # <read-k>

    forward()
    loss.grad[None] = 1.0
    total.grad()
    scale.grad()
    descend()
    err = capsys.readouterr().err
    assert SKIPPED in err and _line_of("read-k") in err and "in descend" in err


def test_the_full_sweep_in_reverse_order_is_silent(chain, capsys):
    x, z, loss, (squash, scale, total), forward = chain
    forward()
    loss.grad[None] = 1.0
    total.grad()
    mid = z.grad.to_numpy()            # a look at an intermediate gradient: complete already
    scale.grad()
    squash.grad()
    got = x.grad.to_numpy()
    _silent(capsys)
    np.testing.assert_allclose(got, finite_difference(forward, x), rtol=1e-6)
    np.testing.assert_allclose(mid, finite_difference(lambda: _tail(chain), z), rtol=1e-6)


def _tail(chain):
    """The loss as a function of z alone (total's part of the chain)."""
    _, _, loss, (_, _, total), _ = chain
    loss[None] = 0.0
    total()
    return loss[None]


def test_forward_runs_after_a_complete_sweep_are_silent(chain, capsys):
    """A line search: the gradient is taken, then the loss evaluated at trial points (launches
    whose adjoints never run, after the sweep): nothing skipped."""
    x, _, loss, (squash, scale, total), forward = chain
    truth = finite_difference(forward, x)
    forward()
    loss.grad[None] = 1.0
    total.grad()
    scale.grad()
    squash.grad()
    start = x.to_numpy()
    for step in (0.1, 0.05):
        x.from_numpy(start - step * x.grad.to_numpy())
        forward()
    got = x.grad.to_numpy()
    _silent(capsys)
    np.testing.assert_allclose(got, truth, rtol=1e-6)


# ---- DiffTaichi's time loop, and checkpointing: forces recomputed in the backward pass ------

@pytest.fixture
def stepper(mode):
    x = ti.field(ti.f64, shape=(STEPS + 1, N), needs_grad=True)
    force = ti.field(ti.f64, shape=N, needs_grad=True)       # one scratch for every step
    forces = ti.field(ti.f64, shape=(STEPS, N), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute_force(t: ti.i32):
        for i in range(N):
            forces[t, i] = ti.sin(x[t, i])  # <force>

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(N):
            x[t + 1, i] = x[t, i] * (1 + DT * forces[t, i])

    @ti.kernel
    def scratch_force(t: ti.i32):
        for i in range(N):
            force[i] = ti.sin(x[t, i])

    @ti.kernel
    def scratch_advance(t: ti.i32):
        for i in range(N):
            x[t + 1, i] = x[t, i] * (1 + DT * force[i])

    @ti.kernel
    def step(t: ti.i32):
        for i in range(N):
            forces[t, i] = ti.sin(x[t, i])
            x[t + 1, i] = x[t, i] * (1 + DT * forces[t, i])

    @ti.kernel
    def compute_loss():
        for i in range(N):
            loss[None] += x[STEPS, i] ** 2

    def run():
        loss[None] = 0.0
        for t in range(STEPS):
            step(t)
        compute_loss()
        return loss[None]

    x.from_numpy(np.vstack([START, np.zeros((STEPS, N))]))
    truth = finite_difference(run, x)[0]
    x.from_numpy(np.vstack([START, np.zeros((STEPS, N))]))
    loss[None] = 0.0
    kernels = (compute_force, advance, scratch_force, scratch_advance, step, compute_loss)
    return x, loss, kernels, truth


def _checkpointed(stepper, skip=(), scratch: bool = False):
    """The backward pass recomputes each step's forces before its adjoints, in reverse step
    order, but skips compute_force's adjoint at the steps `skip`; -> the gradient of the
    start, read for an optimiser step."""
    x, loss, kernels, _ = stepper
    compute_force, advance = kernels[2:4] if scratch else kernels[:2]
    compute_loss = kernels[-1]
    for t in range(STEPS):
        compute_force(t)
        advance(t)
    compute_loss()
    loss.grad[None] = 1.0
    compute_loss.grad()
    for t in reversed(range(STEPS)):
        compute_force(t)
        advance.grad(t)
        if t not in skip:
            compute_force.grad(t)
    got = x.grad.to_numpy()[0]  # <read-c>
    x.from_numpy(np.vstack([START - 0.1 * got, np.zeros((STEPS, N))]))
    return got


def test_a_checkpointed_sweep_that_skips_the_first_steps_adjoint_is_reported(stepper, capsys):
    got = _checkpointed(stepper, skip=(0,))
    err = capsys.readouterr().err
    assert SKIPPED in err
    assert "advance.grad() passed a gradient to forces, but compute_force.grad()" in err
    assert _line_of("force") in err and _line_of("read-c") in err
    assert np.abs(got - stepper[-1]).max() > 0.01           # the gradient it warns of


def test_a_checkpointed_sweep_that_skips_a_later_steps_adjoint_is_an_error(stepper):
    """compute_force's adjoint of step 2 skipped: advance.grad(1) would pass on x.grad
    without it (the out-of-order rule, before any read)."""
    with pytest.raises(ti.SilentZeroRuleError, match="Adjoints out of order"):
        _checkpointed(stepper, skip=(2,))


def test_a_checkpointed_sweep_through_one_scratch_is_caught_too(stepper):
    """With one scratch for every step, force.grad holds each step's gradient into the next:
    an error before the read."""
    with pytest.raises(ti.StaleGradientRuleError, match="force.grad"):
        _checkpointed(stepper, skip=(2,), scratch=True)


@pytest.mark.parametrize("scratch", [False, True], ids=["per-step", "scratch"])
def test_a_checkpointed_sweep_that_chains_every_adjoint_is_silent(stepper, capsys, scratch):
    got = _checkpointed(stepper, scratch=scratch)
    _silent(capsys)
    np.testing.assert_allclose(got, stepper[-1], rtol=1e-6)


def test_a_difftaichi_reverse_loop_is_silent(stepper, capsys):
    x, loss, kernels, truth = stepper
    step, compute_loss = kernels[-2:]
    for t in range(STEPS):
        step(t)
    compute_loss()
    loss.grad[None] = 1.0
    compute_loss.grad()
    for t in reversed(range(STEPS)):
        step.grad(t)
        x.grad.to_numpy()          # (a look at each step: the sweep goes on)
    got = x.grad.to_numpy()[0]
    ti.ad.clear_all_gradients()
    _silent(capsys)
    np.testing.assert_allclose(got, truth, rtol=1e-6)


def test_a_sweep_stopped_mid_loop_is_reported(stepper, capsys):
    x, loss, kernels, _ = stepper
    step, compute_loss = kernels[-2:]
    for t in range(STEPS):
        step(t)
    compute_loss()
    loss.grad[None] = 1.0
    compute_loss.grad()
    for t in reversed(range(1, STEPS)):      # (step 0's adjoint forgotten)
        step.grad(t)
    x.grad.to_numpy()
    ti.ad.clear_all_gradients()
    err = capsys.readouterr().err
    assert SKIPPED in err and "but step.grad()" in err and "(forward launch #" in err
