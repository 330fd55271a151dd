"""Two mistakes that Taichi runs silently, across launches rather than inside one:
- a manual sweep adds to a gradient still holding the gradient at an earlier parameter value
  (the parameter changed, by Python or by an optimiser kernel, and its .grad was not cleared):
  an error, since the sum is the gradient at neither value;
- a kernel outside the Tape computed, from a parameter, a field the taped kernels read: the
  gradient stops at that field (a warning: a constant computed once may be meant);
- kernel.grad() called twice for one forward launch, onto gradients not cleared in between:
  they hold its gradient twice (a warning: with a new seed the sum may be meant).
Each has a clean twin that gives the true gradient with no report. Both modes: these are
launch checks (tinyad/check/launches.py)."""
import numpy as np
import pytest

import tinyad as ti
from tests.gradcheck import finite_difference


@pytest.fixture
def fields(mode):
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    y = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def cube():
        loss[None] = x[None] ** 3

    @ti.kernel
    def step():
        x[None] -= 0.01 * x.grad[None]

    return x, y, loss, cube, step


def sweep(loss, kernel):
    loss.grad[None] = 1.0
    kernel()
    kernel.grad()


def test_a_sweep_at_a_new_parameter_value_without_clearing_is_an_error(fields):
    x, _, loss, cube, _ = fields
    x[None] = 1.0
    sweep(loss, cube)
    assert x.grad[None] == pytest.approx(3.0)          # d(x^3)/dx at 1
    x[None] = 2.0                                      # the parameter moves, x.grad is kept
    with pytest.raises(ti.StaleGradientRuleError) as info:
        sweep(loss, cube)
    report = info.value.report
    assert report.field == "x.grad" and "two parameter values" in report.rule
    assert report.write.loc.text.startswith("    x[None] = 2.0")    # where x changed


def test_an_optimiser_kernel_that_moves_the_parameter_is_caught_too(fields):
    x, _, loss, cube, step = fields
    x[None] = 1.0
    sweep(loss, cube)
    step()                                             # x -= 0.01 * x.grad; x.grad kept
    with pytest.raises(ti.StaleGradientRuleError) as info:
        sweep(loss, cube)
    assert "x[None] -= 0.01 * x.grad[None]" in info.value.report.write.loc.text


def test_clearing_between_sweeps_is_clean_and_right(fields, capsys):
    x, _, loss, cube, step = fields
    x[None] = 1.0
    for _ in range(3):
        x.grad.fill(0)
        sweep(loss, cube)
        assert x.grad[None] == pytest.approx(3 * x[None] ** 2)
        step()
    assert "Rule" not in capsys.readouterr().err


def test_a_kernel_that_zeroes_the_gradient_clears_it_as_fill_does(fields, capsys):
    x, _, loss, cube, step = fields

    @ti.kernel
    def clear_grad():                                  # DiffTaichi's clear_grid, in small
        x.grad[None] = 0.0

    x[None] = 1.0
    for _ in range(3):
        clear_grad()
        sweep(loss, cube)
        assert x.grad[None] == pytest.approx(3 * x[None] ** 2)
        step()
    assert "Rule" not in capsys.readouterr().err


def test_a_kernel_that_stores_a_nonzero_gradient_does_not_clear_it(fields):
    x, _, loss, cube, _ = fields

    @ti.kernel
    def set_grad():
        x.grad[None] = 0.5

    x[None] = 1.0
    sweep(loss, cube)
    set_grad()
    x[None] = 2.0
    with pytest.raises(ti.StaleGradientRuleError):
        sweep(loss, cube)


def test_summing_sweeps_at_the_same_value_is_only_a_warning(fields, capsys):
    x, _, loss, cube, _ = fields
    x[None] = 1.0
    sweep(loss, cube)
    sweep(loss, cube)                                  # the same point: a sum may be meant
    assert x.grad[None] == pytest.approx(6.0)
    err = capsys.readouterr().err
    assert "across rounds" in err and "two parameter values" not in err


@pytest.fixture
def derived(fields):
    x, y, loss, _, _ = fields

    @ti.kernel
    def double():
        y[None] = 2 * x[None]

    @ti.kernel
    def square():
        loss[None] = y[None] ** 2

    x[None] = 1.5
    return x, y, loss, double, square


def test_a_kernel_before_the_tape_on_the_path_is_reported(derived, capsys):
    x, y, loss, double, square = derived
    double()                                           # outside the Tape
    with ti.ad.Tape(loss):
        square()
    err = capsys.readouterr().err
    assert "Computed before the Tape" in err and "y = 2 * x" in err.replace("[None]", "")
    assert x.grad[None] == 0.0                         # what Taichi returns, silently
    assert y.grad[None] == pytest.approx(2 * 3.0)      # the gradient stops at y


def test_the_report_names_the_first_source_in_program_order(mode, capsys):
    # (the sources were a set of fields, ordered by their addresses: another run could name
    # another field)
    a = ti.field(ti.f64, shape=(), needs_grad=True)
    b = ti.field(ti.f64, shape=(), needs_grad=True)
    c = ti.field(ti.f64, shape=(), needs_grad=True)
    y = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def mix():
        t = c[None] * 2
        y[None] = b[None] * a[None] + t

    @ti.kernel
    def total():
        loss[None] = y[None] ** 2

    mix()
    with ti.ad.Tape(loss):
        total()
    assert "was computed from b by mix" in capsys.readouterr().err


def test_the_same_kernel_inside_the_tape_is_clean_and_right(derived, capsys):
    x, _, loss, double, square = derived
    with ti.ad.Tape(loss):
        double()
        square()
    assert x.grad[None] == pytest.approx(8 * 1.5)      # d((2x)^2)/dx
    assert "Rule" not in capsys.readouterr().err and "Computed" not in capsys.readouterr().err


def test_a_taped_kernel_reading_what_it_just_wrote_reads_nothing_from_before(mode, capsys):
    """DiffTaichi's g2p (and exp1/fluid2D_penalty.py, which runs a forward pass outside the
    Tape to draw between iterations): `v[f + 1, p] = ...`, then `x[f + 1, p] = x[f, p] + dt *
    v[f + 1, p]` reads the v its own iteration wrote, not the one from before the Tape. Read
    before it is written, v is from before the Tape, and that is reported."""
    n = 4
    x = ti.field(ti.f64, shape=(3, n), needs_grad=True)
    v = ti.field(ti.f64, shape=(3, n), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def g2p(f: ti.i32):
        for p in range(n):
            v[f + 1, p] = x[f, p] * 2
            x[f + 1, p] = x[f, p] + 0.5 * v[f + 1, p]

    @ti.kernel
    def g2p_reading_first(f: ti.i32):
        for p in range(n):
            x[f + 1, p] = x[f, p] + 0.5 * v[f + 1, p]
            v[f + 1, p] = x[f, p] * 2

    @ti.kernel
    def total():
        for p in range(n):
            loss[None] += x[2, p] ** 2

    def forward(step):
        step(0)
        step(1)
        total()

    x.from_numpy(np.stack([np.arange(1.0, n + 1), np.zeros(n), np.zeros(n)]))
    forward(g2p)                                       # outside the Tape, to draw
    with ti.ad.Tape(loss):
        forward(g2p)
    assert "Computed before" not in capsys.readouterr().err
    assert x.grad.to_numpy()[0] == pytest.approx(32 * np.arange(1.0, n + 1))   # x2 = 4 x0
    forward(g2p_reading_first)
    with ti.ad.Tape(loss):
        forward(g2p_reading_first)
    assert "v was computed from x by g2p_reading_first" in capsys.readouterr().err


def test_which_fields_a_kernel_reads_only_where_its_iteration_wrote_them(mode):
    """check/scans.py's loads_after_own_stores: a store dominates a later load of the same
    element; one in a branch, at another index, or with its index local assigned since, not."""
    from tinyad.check.facts import kernel_facts
    v, w, u, q, out = (ti.field(ti.f64, shape=8, needs_grad=True) for _ in range(5))

    @ti.kernel
    def k():
        for p in range(4):
            v[p] = 1.0
            a = v[p]
            if p > 1:
                w[p] = 2.0
            b = w[p]
            u[p] = 3.0
            c = u[p + 1]
            i = p
            q[i] = 4.0
            i = p + 1
            out[p] = a + b + c + q[i]

    k()
    assert kernel_facts(k.ir_for({})).loaded_own == {v}


def test_a_field_set_from_python_before_the_tape_is_not_reported(derived, capsys):
    _, y, loss, double, square = derived
    double()
    y[None] = 4.0                                      # overwritten from Python: a constant
    with ti.ad.Tape(loss):
        square()
    assert "Computed before" not in capsys.readouterr().err
    assert np.isclose(y.grad[None], 8.0)


def test_a_scan_reading_what_it_stored_itself_is_not_computed_before_the_tape(mode, capsys):
    """Compositing front to back (`if s > 0: before = tape[r, s - 1]`, `tape[r, s] = ...`,
    then `tape[r, n - 1]`) reads only what the launch stored, however tape was computed before
    the Tape (check/scans.py; lesson 17's finite differences were warned about). A loop from 1
    reads tape[r, 0] from before the launch: that one is reported."""
    a = ti.field(ti.f64, shape=(), needs_grad=True)
    samples = ti.field(ti.i32, shape=2)
    tape = ti.field(ti.f64, shape=(2, 3), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def scan():
        for r in range(2):
            n = samples[r]
            for s in range(n):
                before = 0.0
                if s > 0:
                    before = tape[r, s - 1]
                tape[r, s] = before + (1 - before) * a[None]
            loss[None] += tape[r, n - 1]

    @ti.kernel
    def from_one():
        for r in range(2):
            n = samples[r]
            for s in range(1, n):
                tape[r, s] = tape[r, s - 1] + (1 - tape[r, s - 1]) * a[None]
            loss[None] += tape[r, n - 1]

    samples.from_numpy(np.array([3, 2], np.int32))
    a[None] = 0.5
    scan()                                                   # outside the Tape first
    loss[None] = 0.0
    with ti.ad.Tape(loss=loss):
        scan()
    assert "Computed before the Tape" not in capsys.readouterr().err
    assert a.grad[None] == pytest.approx(3 * 0.5 ** 2 + 2 * 0.5)   # d/da of 2 - sum (1-a)^n
    scan()
    loss[None] = 0.0
    with ti.ad.Tape(loss=loss):
        from_one()
    assert "tape was computed from a by scan" in capsys.readouterr().err


def test_a_tape_recomputing_every_step_reads_nothing_from_before_it(mode, capsys):
    """A forward pass before the Tape computed rows 1..3 of x from p; the Tape computes them
    again before it reads them: nothing reaches the Tape from before it (interp mode once
    warned here, as it did not know which rows a launch reads)."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)          # x[t]: one row per step
    p = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        x[t + 1] = x[t] * p[None]

    @ti.kernel
    def final():
        loss[None] = x[3]

    def run():
        for t in range(3):
            step(t)
        final()

    x[0], p[None] = 1.0, 2.0
    run()                                                    # outside the Tape first
    with ti.ad.Tape(loss=loss):
        run()
    assert p.grad[None] == pytest.approx(3 * 2.0 ** 2)      # d(p^3 x0)/dp
    assert "Computed before the Tape" not in capsys.readouterr().err


def test_tapes_replaying_the_steps_of_earlier_ones_are_checked_as_the_first(mode, capsys):
    """Each time step's launch keeps the rows the Tape had written when it last ran and what
    it left (tinyad/check/beforetape.py), so that the next Tape's same step costs one
    comparison. A Tape that skips step 0 finds other rows written at each later step: its
    total() reads x[1], which the Tape before computed from p, and is told; the full Tapes
    around it are silent, with the gradient of finite differences."""
    n = 3
    x = ti.field(ti.f64, shape=(5, n), needs_grad=True)     # x[t]: one row per step
    p = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            x[t + 1, i] = p[None] * (t + 1) + i

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += x[4, i] ** 2 + x[1, i]

    def run(first):
        for t in range(first, 4):
            step(t)
        total()

    def horizon():
        loss[None] = 0.0
        run(0)
        return loss[None]

    p[None] = 0.7
    truth = finite_difference(horizon, p)[()]                # (outside the Tapes, first)
    capsys.readouterr()
    told = []
    for first in (0, 0, 1, 0, 0, 1):
        with ti.ad.Tape(loss=loss):
            run(first)
        told.append("x was computed from p by step before the Tape" in capsys.readouterr().err)
        if first == 0:
            assert p.grad[None] == pytest.approx(truth, rel=1e-6)
    assert told == [False, False, True, False, False, True]


@pytest.mark.parametrize("rewritten", [True, False])
def test_a_row_a_tape_sets_from_a_constant_is_not_derived_in_the_next(mode, capsys, rewritten):
    """x[1] is computed from p before the Tapes. A Tape that sets it from a constant before
    reading it leaves it computed from nothing: the next Tape, which only reads it, is clean.
    The twin Tape that only reads it is told, and so is the next one (x[1] is still p's)."""
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    p = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def derive():
        x[1] = x[0] * p[None]

    @ti.kernel
    def set_one():
        x[1] = 1.5

    @ti.kernel
    def square():
        loss[None] = x[1] * x[1]

    x[0], p[None] = 1.0, 2.0
    derive()
    with ti.ad.Tape(loss=loss):
        if rewritten:
            set_one()
        square()
    said = "x was computed from p by derive before the Tape"
    assert (said in capsys.readouterr().err) is not rewritten
    with ti.ad.Tape(loss=loss):
        square()
    assert (said in capsys.readouterr().err) is not rewritten
    x1 = 1.5 if rewritten else 2.0
    assert x.grad[1] == pytest.approx(2 * x1) and p.grad[None] == 0.0   # loss = x1^2


def test_a_second_grad_of_one_launch_is_said_and_a_cleared_one_is_not(mode, capsys):
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def total():
        for i in range(3):
            loss[None] += ti.sin(x[i])     # an atomic add: its adjoint leaves the seed

    x.from_numpy(np.array([0.1, 0.2, 0.3]))
    loss.grad[None] = 1.0
    total()
    total.grad()
    assert np.allclose(x.grad.to_numpy(), np.cos([0.1, 0.2, 0.3]))
    assert capsys.readouterr().err == ""
    total.grad()                           # again, for the same launch: twice the gradient
    assert np.allclose(x.grad.to_numpy(), 2 * np.cos([0.1, 0.2, 0.3]))
    err = capsys.readouterr().err
    assert "Adjoint run twice" in err and "forward launch #" in err
    x.grad.fill(0)                         # a new gradient: clear, seed, differentiate again
    loss.grad[None] = 2.0
    total.grad()
    assert np.allclose(x.grad.to_numpy(), 2 * np.cos([0.1, 0.2, 0.3]))
    assert capsys.readouterr().err == ""


def test_a_second_grad_whose_seed_was_consumed_adds_nothing_and_is_not_said(fields, capsys):
    x, _, loss, cube, _ = fields
    x[None] = 1.5
    sweep(loss, cube)          # loss = x ** 3, a store: its adjoint zeroes loss.grad
    cube.grad()
    assert np.isclose(x.grad[None], 3 * 1.5 ** 2)
    assert capsys.readouterr().err == ""


def test_a_taped_launch_is_no_recompute_of_an_earlier_one(mode):
    """A launch the Tape records is differentiated by the Tape: it does not stand for an
    earlier launch alike that was never differentiated (as a recompute in a manual sweep
    does), so a manual .grad() still finds that one undifferentiated."""
    from tinyad.runtime import runtime
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    y = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def square():
        for i in x:
            y[i] = x[i] ** 2

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i]

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    square()                           # outside any Tape, not differentiated
    with ti.ad.Tape(loss):             # an adjoint runs after it
        total()
    with ti.ad.Tape(loss):
        square()
        total()
    assert np.allclose(x.grad.to_numpy(), [2.0, 4.0, 6.0])      # d/dx of sum x^2
    outside, taped = [launch for launch in runtime.backend.checker.history
                      if launch.kernel == "square"]
    assert taped.repeats is None and taped.adjoint_runs == 1
    assert outside.adjoint_runs == 0
