"""Gradients lost around a Tape for a reason the checker can see (tinyad/check/lostgrads.py):
each bad version caught, naming both lines and the fix, and each clean twin silent with a
gradient that matches f64 finite differences. Taichi 1.7.4 runs every bad version here
silently (a zero or truncated gradient)."""
import numpy as np
import pytest

import tinyad as ti
from tests.gradcheck import finite_difference
from tests.markers import marked_lines

N = 3


def _line_of(marker: str) -> str:
    return f"test_lost_gradients.py:{_LINES[marker]}"


_LINES = marked_lines(__file__)


@pytest.fixture
def model(mode):
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def double():
        for i in x:
            y[i] = 2 * x[i] + ti.sin(x[i])

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] ** 2

    x.from_numpy(np.array([0.3, -0.5, 1.1]))

    def loss_value():
        loss[None] = 0.0
        double()
        total()
        return loss[None]
    return x, y, loss, double, total, loss_value


def _silent(capsys):
    err = capsys.readouterr().err
    assert "warning" not in err.lower() and "Rule" not in err, err


# ---- (a) a gradient read in Python scope inside the Tape ------------------------------------

def test_gradient_read_inside_the_tape_is_reported(model, capsys):
    x, _, loss, double, total, loss_value = model
    with ti.ad.Tape(loss):  # <tape-a>
        double()
        total()
        stale = x.grad.to_numpy()  # <read-a>
        first = x.grad[0]
    err = capsys.readouterr().err
    assert "Gradient read inside the Tape (warning)" in err
    assert _line_of("tape-a") in err and _line_of("read-a") in err
    assert "read x.grad after the `with ti.ad.Tape(...)` block" in err
    assert err.count("Gradient read inside the Tape") == 2      # once per line
    truth = finite_difference(loss_value, x)
    assert not stale.any() and first == 0.0                     # what the step would have used
    assert np.abs(truth).max() > 1
    np.testing.assert_allclose(x.grad.to_numpy(), truth, rtol=1e-6)


def test_gradient_read_after_the_tape_is_silent(model, capsys):
    x, _, loss, double, total, loss_value = model
    with ti.ad.Tape(loss):
        double()
        total()
    got = x.grad.to_numpy()
    _silent(capsys)
    np.testing.assert_allclose(got, finite_difference(loss_value, x), rtol=1e-6)


# ---- (b) a no-grad kernel on the loss path -------------------------------------------------

def test_no_grad_kernel_on_the_loss_path_is_reported(mode, capsys):
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.ad.no_grad
    @ti.kernel
    def double():
        for i in x:
            y[i] = 2 * x[i]  # <store-b>

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] ** 2  # <read-b>

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    with ti.ad.Tape(loss):
        double()
        total()
    err = capsys.readouterr().err
    assert "No-grad kernel on the loss path (warning)" in err
    assert _line_of("store-b") in err and _line_of("read-b") in err
    assert "drop @ti.ad.no_grad from double" in err
    assert not x.grad.to_numpy().any()                  # as Taichi: the gradient stops at y
    np.testing.assert_allclose(y.grad.to_numpy(), [4.0, 8.0, 12.0])


def test_no_grad_kernel_off_the_path_is_silent(mode, capsys):
    """A no-grad kernel that writes constants (a reset): nothing is lost, and the gradient
    matches finite differences."""
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.ad.no_grad
    @ti.kernel
    def reset():
        for i in y:
            y[i] = 1.0

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] * x[i] ** 2

    x.from_numpy(np.array([1.0, 2.0, 3.0]))

    def loss_value():
        loss[None] = 0.0
        reset()
        total()
        return loss[None]
    with ti.ad.Tape(loss):
        reset()
        total()
    _silent(capsys)
    np.testing.assert_allclose(x.grad.to_numpy(), finite_difference(loss_value, x), rtol=1e-6)


# ---- (c) the loss computed after the Tape ---------------------------------------------------

def test_loss_computed_after_the_tape_is_an_error(model, capsys):
    x, _, loss, double, total, _ = model
    with ti.ad.Tape(loss):  # <tape-c>
        double()
    assert not x.grad.to_numpy().any()                  # what Taichi returns, silently
    with pytest.raises(ti.SilentZeroRuleError) as caught:
        total()
    text = str(caught.value)
    assert "Loss computed after the Tape" in text
    assert _line_of("tape-c") in text and "loss[None] += y[i] ** 2" in text
    assert "launch total inside the `with ti.ad.Tape(loss):` block" in text


def test_loss_computed_inside_the_tape_is_silent(model, capsys):
    x, _, loss, double, total, loss_value = model
    with ti.ad.Tape(loss):
        double()
        total()
    total()                                              # again afterwards: the Tape wrote it
    _silent(capsys)
    np.testing.assert_allclose(x.grad.to_numpy(), finite_difference(loss_value, x), rtol=1e-6)


# ---- (d) gradients cleared after the backward pass, before anything read them -------------

@pytest.fixture
def stepper(model):
    x, _, loss, double, total, loss_value = model
    step = ti.field(ti.f64, shape=N)

    @ti.kernel
    def descend():
        for i in x:
            step[i] = -0.1 * x.grad[i]  # <read-d>

    return x, loss, double, total, loss_value, step, descend


def test_gradients_cleared_before_the_step_are_reported(stepper, capsys):
    x, loss, double, total, loss_value, step, descend = stepper
    with ti.ad.Tape(loss):  # <tape-d>
        double()
        total()
    ti.ad.clear_all_gradients()  # <clear-d>
    descend()
    err = capsys.readouterr().err
    assert "Gradient cleared before it was read (warning)" in err
    for marker in ("tape-d", "clear-d", "read-d"):
        assert _line_of(marker) in err, marker
    assert not step.to_numpy().any()                     # the step used zeros
    assert np.abs(finite_difference(loss_value, x)).max() > 1


def test_a_python_read_of_a_cleared_gradient_is_reported(stepper, capsys):
    x, loss, double, total, *_ = stepper
    with ti.ad.Tape(loss):
        double()
        total()
    x.grad.fill(0)  # <clear-d2>
    x.grad.to_numpy()  # <read-d2>
    err = capsys.readouterr().err
    assert "Gradient cleared before it was read" in err
    assert _line_of("clear-d2") in err and _line_of("read-d2") in err


def test_stepping_then_clearing_is_silent(stepper, capsys):
    x, loss, double, total, loss_value, step, descend = stepper
    with ti.ad.Tape(loss):
        double()
        total()
    descend()
    ti.ad.clear_all_gradients()
    x.grad.to_numpy()            # (reading the cleared zeros after the step: nothing lost)
    _silent(capsys)
    np.testing.assert_allclose(step.to_numpy(), -0.1 * finite_difference(loss_value, x),
                               rtol=1e-6)


# ---- (e) a kernel reading a gradient inside the Tape (an optimiser step in the `with` block) --

def test_a_kernel_reading_the_gradient_inside_the_tape_is_reported(stepper, capsys):
    """The warning comes at the launch; the Tape's backward pass then refuses the kernel's
    adjoint (a read of x.grad has none)."""
    _, loss, double, total, _, _, descend = stepper
    refused = pytest.raises(ti.TinyadRuntimeError, match="through a grad tensor")
    with refused, ti.ad.Tape(loss):  # <tape-e>
        double()
        total()
        descend()
    err = capsys.readouterr().err
    assert "Gradient read inside the Tape (warning)" in err
    assert "the kernel descend reads x.grad inside the Tape" in err
    assert _line_of("tape-e") in err and _line_of("read-d") in err
    assert "launch descend after the `with ti.ad.Tape(...)` block" in err


@pytest.fixture
def stopped_step(model):
    """An optimiser step that Taichi would let run inside the Tape: no adjoint of its own."""
    x, _, loss, double, total, loss_value = model
    new_x = ti.field(ti.f64, shape=N)

    @ti.ad.no_grad
    @ti.kernel
    def descend():
        for i in x:
            new_x[i] = x[i] - 0.1 * x.grad[i]  # <read-e>

    return x, loss, double, total, loss_value, new_x, descend


def test_a_no_grad_step_inside_the_tape_is_reported(stopped_step, capsys):
    x, loss, double, total, loss_value, new_x, descend = stopped_step
    with ti.ad.Tape(loss):  # <tape-e2>
        double()
        total()
        descend()
    err = capsys.readouterr().err
    assert "Gradient read inside the Tape (warning)" in err
    assert _line_of("tape-e2") in err and _line_of("read-e") in err
    assert "launch descend after the `with ti.ad.Tape(...)` block" in err
    truth = finite_difference(loss_value, x)
    np.testing.assert_array_equal(new_x.to_numpy(), x.to_numpy())   # the step used zeros
    assert np.abs(truth).max() > 1


def test_the_same_step_after_the_tape_is_silent(stopped_step, capsys):
    x, loss, double, total, loss_value, new_x, descend = stopped_step
    with ti.ad.Tape(loss):
        double()
        total()
    descend()
    _silent(capsys)
    np.testing.assert_allclose(new_x.to_numpy(),
                               x.to_numpy() - 0.1 * finite_difference(loss_value, x), rtol=1e-6)


# ---- the per-frame Tape: state carried between Tapes by a copy ------------------------------

@pytest.fixture
def frames(mode):
    frames = 3
    state = ti.field(ti.f64, shape=N, needs_grad=True)
    nxt = ti.field(ti.f64, shape=N, needs_grad=True)
    history = ti.field(ti.f64, shape=(frames + 1, N), needs_grad=True)
    p = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def step():
        for i in state:
            nxt[i] = state[i] * p[None] + 1  # <step>

    @ti.kernel
    def frame_loss():
        for i in nxt:
            loss[None] += nxt[i] ** 2

    @ti.kernel
    def step_t(t: ti.i32):
        for i in range(N):
            history[t + 1, i] = history[t, i] * p[None] + 1

    @ti.kernel
    def frame_loss_t(t: ti.i32):
        for i in range(N):
            loss[None] += history[t + 1, i] ** 2

    def full_horizon():
        loss[None] = 0.0
        for t in range(frames):
            step_t(t)
            frame_loss_t(t)
        return loss[None]
    p[None] = 0.5
    return frames, state, nxt, p, loss, step, frame_loss, step_t, frame_loss_t, full_horizon


def test_state_copied_between_per_frame_tapes_is_reported(frames, capsys):
    count, state, nxt, p, loss, step, frame_loss, *_, full_horizon = frames
    summed = 0.0
    for _ in range(count):
        with ti.ad.Tape(loss):
            step()
            frame_loss()
        summed += p.grad[None]
        state.copy_from(nxt)  # <copy>
    err = capsys.readouterr().err
    assert "Computed before the Tape (warning)" in err
    assert "state was computed from state by state.copy_from(nxt)" in err
    assert _line_of("copy") in err and _line_of("step") in err
    truth = finite_difference(full_horizon, p)[()]
    assert abs(summed - truth) > 1                       # the truncated gradient it warns of


def test_one_tape_over_the_horizon_is_silent_and_right(frames, capsys):
    count, *_, p, loss, _, _, step_t, frame_loss_t, full_horizon = frames
    with ti.ad.Tape(loss):
        for t in range(count):
            step_t(t)
            frame_loss_t(t)
    got = p.grad[None]
    _silent(capsys)
    assert got == pytest.approx(finite_difference(full_horizon, p)[()], rel=1e-6)


def test_a_copy_before_the_first_tape_from_python_values_is_silent(frames, capsys):
    _, state, nxt, p, loss, step, frame_loss, *_ = frames
    nxt.from_numpy(np.array([1.0, 2.0, 3.0]))
    state.copy_from(nxt)                                  # constants: nothing to carry
    with ti.ad.Tape(loss):
        step()
        frame_loss()
    _silent(capsys)
    assert p.grad[None] == pytest.approx(sum(2 * (s * 0.5 + 1) * s for s in (1.0, 2.0, 3.0)))


# ---- from_numpy inside the Tape: a copy through numpy ---------------------------------------

def test_a_copy_through_numpy_inside_the_tape_is_reported(model, capsys):
    x, y, loss, double, _, _ = model
    z = ti.field(ti.f64, shape=N, needs_grad=True)

    @ti.kernel
    def total_z():
        for i in z:
            loss[None] += z[i] ** 2  # <read-np>

    with ti.ad.Tape(loss):
        double()
        z.from_numpy(y.to_numpy())  # <from-numpy>
        total_z()
    err = capsys.readouterr().err
    assert "Gradient stopped by from_numpy (warning)" in err
    assert _line_of("from-numpy") in err and _line_of("read-np") in err
    assert not x.grad.to_numpy().any()                    # as Taichi: cut at from_numpy
    with ti.ad.Tape(loss):                                # the fix: copy_from
        double()
        z.copy_from(y)
        total_z()
    _silent(capsys)
    assert np.abs(x.grad.to_numpy()).max() > 1


def test_state_copied_back_inside_the_per_frame_tape_is_an_error(frames):
    """The copy inside the Tape, after step read the state: step's adjoint would replay the
    new state (Global Data Access Rule 1, from Python scope)."""
    _, state, nxt, p, loss, step, frame_loss, *_ = frames
    with pytest.raises(ti.ReadThenOverwriteRuleError, match="changed in Python scope"):
        with ti.ad.Tape(loss):
            step()
            frame_loss()
            state.copy_from(nxt)
