"""Nothing lost on failure (tinyad/undo.py): a launch or a Tape that raises leaves every field
and gradient as it was before it began, wherever launches are checked: interp mode, and fast
mode with debug=True (the tests below run both). Fast mode without debug copies nothing: the
last test pins down what it promises instead."""
from __future__ import annotations

import _thread
import signal
import threading

import numpy as np
import pytest

import tinyad as ti


def program(mode, debug=True):
    ti.init(mode=mode, default_fp=ti.f64, debug=debug)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    y = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def overruns(n: ti.i32):
        for i in range(n):             # n = 5 writes y[0..3], then fails at y[4]
            y[i] = x[i] * 2.0

    @ti.kernel
    def double():
        for i in range(4):
            y[i] = x[i] * 2.0

    @ti.kernel
    def total():
        for i in range(4):
            loss[None] += y[i] * y[i]

    x.from_numpy(np.arange(4.0))
    y.fill(7.0)
    x.grad.fill(3.0)
    loss[None] = 11.0
    return x, y, loss, overruns, double, total


def state(*fields):
    """Every value a failure must not change: the fields and their gradients."""
    return [f.to_numpy().tolist() for f in fields] + [f.grad.to_numpy().tolist() for f in fields]


def test_a_launch_that_fails_part_way_changes_nothing(mode):
    x, y, loss, overruns, double, total = program(mode)
    before = state(x, y, loss)
    with pytest.raises(ti.TinyadIndexError):
        overruns(5)
    assert state(x, y, loss) == before
    overruns(4)                        # and the next launch runs on the old values
    assert y.to_numpy().tolist() == [0.0, 2.0, 4.0, 6.0]


def test_a_tape_that_fails_in_its_recorded_code_changes_nothing(mode):
    """The Tape cleared the gradients and the loss, two launches ran, the third failed: all of
    it is undone, the cleared gradients included."""
    x, y, loss, overruns, double, total = program(mode)
    before = state(x, y, loss)
    with pytest.raises(ti.TinyadIndexError):
        with ti.ad.Tape(loss=loss):
            double()
            total()
            overruns(5)
    assert state(x, y, loss) == before


def test_a_tape_that_fails_in_python_scope_changes_nothing(mode):
    x, y, loss, overruns, double, total = program(mode)
    before = state(x, y, loss)
    with pytest.raises(ZeroDivisionError):
        with ti.ad.Tape(loss=loss):
            x[1] = 5.0                 # a Python-scope write inside the Tape is undone too
            double()
            total()
            1 / 0
    assert state(x, y, loss) == before


def test_a_tape_whose_backward_pass_fails_changes_nothing(mode):
    """A rule error found when the adjoint runs: gradients and fields as before the Tape."""
    ti.init(mode=mode, default_fp=ti.f64, debug=True)
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def square_sum():
        for i in x:
            loss[None] += x[i] * x[i]

    @ti.kernel
    def shift():
        for i in x:
            x[i] += 1.0

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    x.grad.fill(-1.0)
    before = state(x, loss)
    with pytest.raises(ti.AutodiffRuleError):
        with ti.ad.Tape(loss=loss):
            square_sum()
            shift()                    # changes x after square_sum read it: Rule 1
    assert state(x, loss) == before


def test_a_successful_tape_keeps_its_results(mode):
    """The undo log must never touch a Tape that ends well: d/dx sum((2x)^2) = 8x."""
    x, y, loss, overruns, double, total = program(mode, debug=False)
    with ti.ad.Tape(loss=loss):
        double()
        total()
    assert loss[None] == pytest.approx(4 * (0 + 1 + 4 + 9))
    np.testing.assert_allclose(x.grad.to_numpy(), 8 * np.arange(4.0))


def test_a_tape_that_cannot_begin_changes_nothing_and_leaves_nothing_behind(mode):
    """A Tape refused as it begins (grad_check takes a list of fields, as in Taichi) has
    cleared the gradients already: they are put back, and no later launch runs inside its undo
    log (a launch that fails afterwards must still change nothing). d/dx sum((2x)^2) = 8x."""
    x, y, loss, overruns, double, total = program(mode)
    before = state(x, y, loss)
    with pytest.raises(ti.TinyadError, match="grad_check should be a list"), \
            ti.ad.Tape(loss, grad_check=x):
        pass
    assert state(x, y, loss) == before
    with pytest.raises(ti.TinyadIndexError):
        overruns(5)
    assert state(x, y, loss) == before
    with ti.ad.Tape(loss=loss):
        double()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 8 * np.arange(4.0))


def test_fast_mode_without_debug_keeps_going_after_a_failed_tape():
    """Unchecked compiled launches copy nothing: a Tape stopped by an exception leaves the
    values it had made, and the next Tape starts clean and gets the true gradient."""
    x, y, loss, overruns, double, total = program("fast", debug=False)
    with pytest.raises(ZeroDivisionError):
        with ti.ad.Tape(loss=loss):
            double()
            1 / 0
    assert y.to_numpy().tolist() == [0.0, 2.0, 4.0, 6.0]       # double() ran: kept
    assert x.grad.to_numpy().tolist() == [0.0] * 4              # cleared on entry: kept
    with ti.ad.Tape(loss=loss):
        double()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 8 * np.arange(4.0))


def test_ctrl_c_in_a_runaway_loop_leaves_the_fields_intact():
    """Interp mode runs a kernel's loops in Python, so Ctrl-C stops even a `while` that never
    ends; the fields it was writing are put back. (A compiled kernel cannot be interrupted
    until it returns.)"""
    ti.init(mode="interp", default_fp=ti.f64)
    x = ti.field(ti.f64, shape=3)

    @ti.kernel
    def runaway():
        for i in x:
            while x[i] > -1.0:         # never false: x only grows
                x[i] += 1.0

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    # Ctrl-C as in a plain Python process: an xdist worker may ignore SIGINT, and then
    # interrupt_main does nothing and the loop never ends
    # interrupt; a Ctrl-C that lands in a finalizer is swallowed by Python ("Exception ignored"),
    # so press it again every half second, as a user would, until the launch stops
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    stopped = threading.Event()

    def press_ctrl_c():
        while not stopped.wait(0.5):
            _thread.interrupt_main()
    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            runaway()
    finally:
        stopped.set()
        presser.join()
        signal.signal(signal.SIGINT, previous)
    assert x.to_numpy().tolist() == [1.0, 2.0, 3.0]


def test_a_signal_handler_that_raises_stops_the_launch_with_its_own_exception():
    """A timeout the user's program sets (SIGALRM raising TimeoutError, as test harnesses do)
    surfaces as that exception, not as an internal error of tinyad, and the fields it
    interrupted are put back."""
    ti.init(mode="interp", default_fp=ti.f64)
    x = ti.field(ti.f64, shape=3)

    @ti.kernel
    def runaway():
        for i in x:
            while x[i] > -1.0:
                x[i] += 1.0

    def timeout(signum, frame):
        raise TimeoutError("the program's own timeout")

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    previous = signal.signal(signal.SIGALRM, timeout)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(TimeoutError, match="the program's own timeout") as info:
            runaway()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not isinstance(info.value, ti.TinyadError)
    assert x.to_numpy().tolist() == [1.0, 2.0, 3.0]
