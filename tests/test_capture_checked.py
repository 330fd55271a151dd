"""ti.capture with the rule checks on (issue 36, item 2): a captured function reports what the
same function uncaptured reports, on its first call and on later ones where the values change
between calls so that a violation, a NaN or a bad index appears only then; and after each call
the checker is left as the uncaptured call leaves it, so that what the program does next
(reading gradients, writing fields, another Tape) is checked alike.

Each program runs twice from a fresh ti.init, plainly and captured, call by call. In fast mode
a clean call is replayed (tinyad/checkedreplay.py): the tests say so with `captured.replays`.
Interp mode runs a captured function plainly every call, and must report alike too.
"""
import contextlib
import functools
import io
from types import SimpleNamespace

import numpy as np
import pytest

import tinyad as ti
from tests.checkerstate import differences, state
from tinyad.runtime import runtime

CALLS = 5
CHANGED = 3      # the call (from 0) before which the values change, where a program has it


def _outcome(action) -> tuple:
    """What `action` shows: the error it raised (its report, else its text), what it wrote
    on stderr (but capture's own notes), the violations warn mode holds."""
    err = io.StringIO()
    raised = None
    with contextlib.redirect_stderr(err):
        try:
            action()
        except Exception as exc:     # noqa: BLE001  (what a user would see, compared)
            report = getattr(exc, "report", None)
            raised = (type(exc).__name__, report.to_dict() if report is not None else str(exc))
    said = "\n".join(line for line in err.getvalue().splitlines()
                     if not line.startswith("[tinyad] ti.capture:"))
    problems = sorted((p.report.rule, str(p.report.kernel), tuple(sorted(p.elements)))
                      for p in runtime.backend.checks.problems())
    return raised, said, problems


def _run(mode, check, program, captured: bool):
    """-> (per call: its outcome, the after-call actions' outcome, the fields' values and the
    checker's state after both), the function called."""
    ti.init(mode=mode, check=check, default_fp=ti.f64, random_seed=3)
    prog = program()
    call = ti.capture(prog.step) if captured else prog.step
    seen = []
    checker = runtime.backend.checker if mode == "fast" else None   # (fast mode's state)
    for n in range(CALLS):
        prog.before(n)
        during = _outcome(call)
        states = [state(checker)] if checker is not None else []
        after = _outcome(functools.partial(prog.after, n))
        values = [runtime.backend.storage.to_host(f).copy() for f in prog.fields]  # (unseen)
        states += [state(checker)] if checker is not None else []
        seen.append((during, after, values, states))
    return seen, call


def _compare(mode, check, program) -> int:
    """Run `program` plainly and captured; assert every call alike; -> the replays made."""
    plain, _ = _run(mode, check, program, captured=False)
    captured, fn = _run(mode, check, program, captured=True)
    for n, (one, other) in enumerate(zip(plain, captured)):
        assert one[0] == other[0], f"call {n}: the call's report differs"
        assert one[1] == other[1], f"call {n}: what followed it was reported differently"
        for a, b in zip(one[2], other[2]):
            np.testing.assert_array_equal(a, b, err_msg=f"call {n}")
        for when, (a, b) in zip(("after the call", "after what followed"), zip(one[3], other[3])):
            assert differences(a, b) == [], f"call {n}: the checker's state {when}"
    if mode == "interp":
        assert fn.replays == 0
    return fn.replays


@pytest.fixture(autouse=True)
def _compiled_at_once(monkeypatch):
    """Captured programs compile at once, not beside the calls (compile/ahead.py), so that
    which call replays is certain."""
    monkeypatch.setenv("TINYAD_COMPILE_AHEAD", "0")


# ---- programs whose values change before the third call ------------------------------------

def _nan_in_the_third_call():
    """sqrt at 0 gives an infinite gradient: a warning as the backward ends, and an error where
    the gradient is used after the call."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def energy():
        for i in x:
            loss[None] += ti.sqrt(x[i])

    def step():
        with ti.ad.Tape(loss):
            energy()

    def before(n):
        x.from_numpy(np.array([1.0, 2.0, 0.0 if n == CHANGED else 3.0, 4.0]))

    def after(n):
        x.grad.to_numpy()
    return SimpleNamespace(step=step, before=before, after=after, fields=[x, loss, x.grad])


def _nan_in_one_step_of_the_third_call():
    """Three steps, a Tape each: the first step's gradient is infinite in the third call, and
    the next step's Tape clears it. The look after that adjoint finds it (not one at the end)."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def energy():
        for i in x:
            loss[None] += ti.sqrt(x[i])

    @ti.kernel
    def shift():
        for i in x:
            x[i] += 1.0

    def step():
        for _ in range(3):
            with ti.ad.Tape(loss):
                energy()
            shift()

    def before(n):
        x.from_numpy(np.array([1.0, 2.0, 0.0 if n == CHANGED else 3.0, 4.0]))
    return SimpleNamespace(step=step, before=before, after=lambda n: None,
                           fields=[x, loss, x.grad])


def _overwrite_in_the_third_call():
    """A kernel in the Tape overwrites what the one before it read (Rule 1), with a new value
    only from the third call on (fast mode compares values; interp mode sees the store)."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    s = ti.field(ti.f64, shape=())
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def square():
        for i in x:
            loss[None] += x[i] * x[i]

    @ti.kernel
    def scale():
        for i in x:
            x[i] = x[i] * s[None]

    def step():
        with ti.ad.Tape(loss):
            square()
            scale()

    def before(n):
        x.from_numpy(np.arange(1.0, 5.0))
        s[None] = 2.0 if n >= CHANGED else 1.0
    return SimpleNamespace(step=step, before=before, after=lambda n: None,
                           fields=[x, loss, x.grad])


def _bad_index_in_the_third_call():
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    where = ti.field(ti.i32, shape=4)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def gather():
        for i in where:
            loss[None] += x[where[i]] ** 2

    def step():
        with ti.ad.Tape(loss):
            gather()

    def before(n):
        x.from_numpy(np.arange(1.0, 5.0))
        where.from_numpy(np.array([3, 2, 9 if n == CHANGED else 1, 0], np.int32))
    return SimpleNamespace(step=step, before=before, after=lambda n: None,
                           fields=[x, loss, x.grad])


def _race_in_the_third_call():
    """A scatter through an index field: two iterations store into one element (a parallel
    conflict on the gradient's path) once the indices repeat, in the third call."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    y = ti.field(ti.f64, shape=4, needs_grad=True)
    where = ti.field(ti.i32, shape=4)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def scatter():
        for i in x:
            y[where[i]] = x[i] * 2

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] ** 2

    def step():
        with ti.ad.Tape(loss):
            scatter()
            total()

    def before(n):
        x.from_numpy(np.arange(1.0, 5.0))
        where.from_numpy(np.array([3, 2, 3 if n == CHANGED else 1, 0], np.int32))
    return SimpleNamespace(step=step, before=before, after=lambda n: None,
                           fields=[x, y, loss, x.grad])


def _divergence_inside_the_call():
    """A manual sweep inside the captured function, after a kernel that changes what the
    forward read, from the third call on (a replay divergence)."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    w = ti.field(ti.f64, shape=4)
    s = ti.field(ti.f64, shape=())
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in range(4):
            loss[None] += w[i] * x[i] ** 2

    @ti.kernel
    def bump():
        for i in range(4):
            w[i] = w[i] * s[None]

    def step():
        k()
        bump()
        loss.grad[None] = 1
        k.grad()

    def before(n):
        x.from_numpy(np.arange(1.0, 5.0))
        w.from_numpy(np.ones(4))
        s[None] = 3.0 if n >= CHANGED else 1.0
        loss[None] = 0
        x.grad.fill(0)
    return SimpleNamespace(step=step, before=before, after=lambda n: None,
                           fields=[x, w, loss, x.grad])


@pytest.mark.parametrize("program", [_nan_in_the_third_call, _nan_in_one_step_of_the_third_call,
                                     _overwrite_in_the_third_call, _bad_index_in_the_third_call,
                                     _race_in_the_third_call, _divergence_inside_the_call])
@pytest.mark.parametrize("check", ["error", "warn"])
def test_a_problem_that_appears_in_a_later_call_is_reported_as_uncaptured(mode, check, program):
    _compare(mode, check, program)


@pytest.mark.parametrize("program", [_nan_in_the_third_call, _nan_in_one_step_of_the_third_call])
def test_the_third_call_reports_the_nan_after_replays_of_the_clean_ones(mode, program):
    """The clean calls before it were replayed: the NaN is found by the replay's own look,
    which runs the call plainly for its report."""
    replays = _compare(mode, "error", program)
    if mode == "fast":
        assert replays >= 1


# ---- a manual sweep's checks that read values (tinyad/checkpredicates.py) ----------------------
# Each program's checks decide from values in every call: a clean call replays with the same
# test compiled in; where the values change (bad=True, from the third call on) the test comes
# out otherwise, the replay stops, and the call runs plainly for its report.

def _unseeded_output(bad: bool):
    """A manual sweep whose loss gradient is seeded before the call, but not before the
    third (unseeded outputs: a warning; the gradients come out zero)."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    y = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def double():
        for i in x:
            y[i] = 2 * x[i] + ti.sin(x[i])

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] ** 2

    def step():
        double()
        total()
        total.grad()
        double.grad()

    def before(n):
        x.from_numpy(np.array([0.3, -0.5, 1.1, 0.7]) * (n + 1))
        loss[None] = 0
        x.grad.fill(0)
        y.grad.fill(0)
        loss.grad[None] = 0.0 if bad and n >= CHANGED else 1.0
    return SimpleNamespace(step=step, before=before, after=lambda n: x.grad.to_numpy(),
                           fields=[x, y, loss, x.grad, y.grad])


def _point_changed(bad: bool):
    """A recomputing sweep, mpm's shape: adv.grad(1) takes p.grad at p's values; adv(0) is
    recomputed before adv.grad(0) adds to p.grad, and writes p[1] again: the same values,
    but from the third call on a kernel between changed what it adds (a gradient taken at two
    points: an error)."""
    n = 4
    p = ti.field(ti.f64, shape=(3, n), needs_grad=True)
    c = ti.field(ti.f64, shape=())
    s = ti.field(ti.f64, shape=())
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def adv(t: ti.i32):
        for i in range(n):
            p[t + 1, i] = 0.9 * ti.sin(p[t, i]) + c[None]

    @ti.kernel
    def measure():
        for i in range(n):
            loss[None] += p[2, i] ** 2

    @ti.kernel
    def bump():
        c[None] += s[None]

    def step():
        adv(0)
        adv(1)
        measure()
        bump()
        loss.grad[None] = 1
        measure.grad()
        adv.grad(1)
        adv(0)           # (the grid is not stored: recomputed, as mpm's)
        adv.grad(0)

    def before(m):
        start = np.zeros((3, n))
        start[0] = np.linspace(0.1, 1.0, n)
        p.from_numpy(start)
        c[None] = 0.0
        s[None] = 0.5 if bad and m >= CHANGED else 0.0
        loss[None] = 0
        p.grad.fill(0)

    def after(m):
        # (not after the error: the sweep is left half done, and reading p.grad then says an
        # adjoint was skipped, a memo holding a launch record tests/checkerstate.py cannot
        # compare across two runs)
        if m < CHANGED:
            p.grad.to_numpy()
    return SimpleNamespace(step=step, before=before, after=after, fields=[p, loss, p.grad])


def _recomputed_read_changed(bad: bool):
    """mpm's recomputed grid: g reads w, which `refresh` computes again from b between the
    forward launch and its kernel.grad(); the same values, but from the third call on a kernel
    between changed b (a replay divergence: an error)."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    w = ti.field(ti.f64, shape=4)
    b = ti.field(ti.f64, shape=4)
    s = ti.field(ti.f64, shape=())
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def g():
        for i in range(4):
            loss[None] += w[i] * x[i] ** 2

    @ti.kernel
    def refresh():
        for i in range(4):
            w[i] = 0.5 * b[i] + 1.0

    @ti.kernel
    def drift():
        for i in range(4):
            b[i] += s[None]

    def step():
        refresh()
        g()
        drift()
        refresh()
        loss.grad[None] = 1
        g.grad()

    def before(n):
        x.from_numpy(np.arange(1.0, 5.0))
        b.from_numpy(np.linspace(0.0, 1.0, 4))
        s[None] = 0.25 if bad and n >= CHANGED else 0.0
        loss[None] = 0
        x.grad.fill(0)
    return SimpleNamespace(step=step, before=before, after=lambda n: x.grad.to_numpy(),
                           fields=[x, w, loss, x.grad])


# (program, tinyad/check/pointcopies.py SMALL_FIELD: 4 copies p's point box by box, as mpm's F)
VALUE_CHECKS = [pytest.param(_unseeded_output, None, id="unseeded"),
                pytest.param(_point_changed, None, id="point"),
                pytest.param(_point_changed, 4, id="point-by-box"),
                pytest.param(_recomputed_read_changed, None, id="recomputed-read")]


@pytest.mark.parametrize(("program", "small_field"), VALUE_CHECKS)
@pytest.mark.parametrize("check", ["error", "warn"])
@pytest.mark.parametrize("runner", ["compiled", "python"])
def test_a_value_check_that_fails_in_a_later_call_is_reported_as_uncaptured(
        mode, check, program, small_field, runner, monkeypatch):
    """The clean calls before it replay, with the check compiled in: its outcome differs in
    the third call, which then runs plainly and reports as the uncaptured one. runner=python:
    the program's launches run from Python (as those of kernels with threads), and so do its
    tests."""
    if runner == "python":
        if mode == "interp":
            pytest.skip("interp mode runs no captured program")
        monkeypatch.setattr("tinyad.compile.sequence._callable_from_numba", lambda k: False)
    if small_field:
        monkeypatch.setattr("tinyad.check.pointcopies.SMALL_FIELD", small_field)
    replays = _compare(mode, check, functools.partial(program, True))
    if mode == "fast":
        assert replays >= 1


@pytest.mark.parametrize(("program", "small_field"), VALUE_CHECKS)
def test_a_clean_sweep_whose_checks_read_values_replays(mode, program, small_field,
                                                        monkeypatch):
    if small_field:
        monkeypatch.setattr("tinyad.check.pointcopies.SMALL_FIELD", small_field)
    replays = _compare(mode, "error", functools.partial(program, False))
    if mode == "fast":
        assert replays >= 2


# ---- what the checker remembers across calls --------------------------------------------------

def _model():
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    y = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def double():
        for i in x:
            y[i] = 2 * x[i] + ti.sin(x[i])

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] ** 2

    def before(n):
        x.from_numpy(np.array([0.3, -0.5, 1.1]) * (n + 1))
    return SimpleNamespace(x=x, y=y, loss=loss, double=double, total=total, before=before,
                           fields=[x, y, loss, x.grad, y.grad])


def _derived_before_the_tape():
    """The Tape reads y, which the call computes from x after it: from the second call on, y
    was computed before the Tape (a warning each call)."""
    m = _model()

    def step():
        with ti.ad.Tape(m.loss):
            m.total()
        m.double()
    return SimpleNamespace(step=step, before=m.before, after=lambda n: None, fields=m.fields)


def _loss_written_after_the_tape():
    """The Tape's launches do not write its loss; a kernel after the call does (an error)."""
    m = _model()

    def step():
        with ti.ad.Tape(m.loss):
            m.double()
    return SimpleNamespace(step=step, before=m.before, after=lambda n: m.total(),
                           fields=m.fields)


def _gradient_cleared_before_it_is_read():
    """After the call, the gradient is cleared and then read (a warning)."""
    m = _model()

    def step():
        with ti.ad.Tape(m.loss):
            m.double()
            m.total()

    def after(n):
        m.x.grad.fill(0)
        m.x.grad.to_numpy()
    return SimpleNamespace(step=step, before=m.before, after=after, fields=m.fields)


@pytest.mark.parametrize("program", [_derived_before_the_tape, _loss_written_after_the_tape,
                                     _gradient_cleared_before_it_is_read])
def test_what_follows_a_call_is_reported_as_uncaptured(mode, program):
    _compare(mode, "error", program)


def test_a_violation_after_replayed_calls_sees_the_state_they_left(mode):
    """Clean calls replay; what follows each reads the checker's state the replays set."""
    replays = _compare(mode, "error", _gradient_cleared_before_it_is_read)
    if mode == "fast":
        assert replays >= 2


# ---- clean programs: replayed, the checker left as the plain calls leave it -------------------

def _gravity():
    n = 6
    x = ti.Vector.field(2, dtype=ti.f64, shape=n, needs_grad=True)
    v = ti.Vector.field(2, dtype=ti.f64, shape=n)
    U = ti.field(dtype=ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(n, n):
            r = x[i] - x[j]
            U[None] += -1 / ti.sqrt(r.dot(r) + 1e-3)

    @ti.kernel
    def advance(dt: ti.f64):
        for i in x:
            v[i] -= dt * x.grad[i]
            x[i] += dt * v[i]

    def step():
        for _ in range(5):
            with ti.ad.Tape(loss=U):
                compute_U()
            advance(1e-3)

    x0 = np.random.default_rng(1).random((n, 2))

    def before(n):
        x.from_numpy(x0)
        v.fill(0)

    def after(n):
        x.grad.to_numpy()
        U[None]
    return SimpleNamespace(step=step, before=before, after=after, fields=[x, v, U, x.grad],
                           x=x, U=U, compute_U=compute_U)


def _time_loop_in_one_tape():
    """mass_spring's shape: fills inside the Tape, a time-indexed field forward and back; the
    loop long enough for threads (the replay runs the launches from Python)."""
    n, steps = 4096, 3
    x = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
    w = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(n):
            x[t + 1, i] = x[t, i] * w[None] + ti.sin(x[t, i])

    @ti.kernel
    def measure():
        for i in range(n):
            loss[None] += x[steps, i] ** 2 / n

    def step():
        with ti.ad.Tape(loss=loss):
            loss.fill(0)
            for t in range(steps):
                advance(t)
            measure()

    def before(k):
        start = np.zeros((steps + 1, n))
        start[0] = np.linspace(0, 1, n)
        x.from_numpy(start)
        w[None] = 0.9 + 0.01 * k

    def after(k):
        w.grad[None]
    return SimpleNamespace(step=step, before=before, after=after, fields=[x, loss, w.grad])


def _forward_after_a_tape():
    """A time loop captured without a Tape, after a Tape (run plainly) over the same large
    field: the gradient its Tape took is at the field's values then, which the loop
    overwrites row by row, so the checker keeps them, box by box, for a later manual sweep
    to compare (the replay copies them as the plain call does)."""
    steps, n = 6, 48
    p = ti.field(ti.f64, shape=(steps + 1, n, n), needs_grad=True)
    p0 = ti.field(ti.f64, shape=(n, n), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def start():
        for i, j in p0:
            p[0, i, j] = p0[i, j]

    @ti.kernel
    def advance(t: ti.i32):
        for i, j in ti.ndrange(n, n):
            p[t + 1, i, j] = ti.sin(p[t, i, j]) + 0.1 * t

    @ti.kernel
    def measure():
        for i, j in ti.ndrange(n, n):
            loss[None] += p[steps, i, j] ** 2

    def step():
        start()
        for t in range(steps):
            advance(t)

    def before(k):
        p0.from_numpy(np.linspace(0, 1, n * n).reshape(n, n) + k)

    def after(k):
        with ti.ad.Tape(loss=loss):
            step()
            measure()
    return SimpleNamespace(step=step, before=before, after=after, fields=[p, loss, p0.grad])


@pytest.mark.parametrize("program", [_gravity, _time_loop_in_one_tape, _forward_after_a_tape])
def test_a_clean_program_replays_and_leaves_the_checker_as_the_plain_calls(mode, program):
    replays = _compare(mode, "error", program)
    if mode == "fast":
        assert replays >= 2


def _forward_and_gradient_calls(mode, captured: bool):
    """The benchmarks' harness's order: a forward function and a Tape'd one, the positions
    reset before each call, and in between a Tape outside both whose gradient is read at
    another line. -> (the gradients after each round, the replays made)."""
    ti.init(mode=mode, check="error", default_fp=ti.f64)
    prog = _gravity()

    def forward():
        prog.U.fill(0)
        prog.compute_U()
    forward_fn, step_fn = (ti.capture(forward), ti.capture(prog.step)) if captured else \
        (forward, prog.step)
    grads = []
    for n in range(CALLS + 2):
        if n == 2:                   # (as the harness's result(), after its settling calls)
            prog.before(n)
            with ti.ad.Tape(loss=prog.U):
                prog.compute_U()
            prog.x.grad.to_numpy()
        prog.before(n)
        forward_fn()
        prog.before(n)
        step_fn()
        grads.append(prog.x.grad.to_numpy())
    return grads, getattr(step_fn, "replays", 0)


def test_a_tape_between_calls_that_leaves_a_gradient_point_keeps_the_replays(mode):
    """The point a gradient was taken at is read by the next call's Tape only as whether there
    is one (check/launches.py gradients_cleared: `if not points`), not what it holds: the
    replays go on across the Tape between calls, with the plain calls' gradients."""
    plain, _ = _forward_and_gradient_calls(mode, captured=False)
    captured, replays = _forward_and_gradient_calls(mode, captured=True)
    for a, b in zip(plain, captured):
        np.testing.assert_array_equal(a, b)
    # fast mode: the first two calls are watched, every later one replays; interp: none does
    assert replays == (CALLS + 2 - 2 if mode == "fast" else 0)


# ---- a kernel.grad() of a launch a replay made -------------------------------------------------

def _forward_then_sweep(sweep_every_call: bool):
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    w = ti.field(ti.f64, shape=4)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in range(4):
            loss[None] += w[i] * x[i] ** 2

    def before(n):
        x.from_numpy(np.arange(1.0, 5.0))
        w.from_numpy(np.ones(4))
        loss[None] = 0
        x.grad.fill(0)

    def after(n):
        if sweep_every_call or n == CALLS - 1:
            w[1] = 5.0              # the forward's read of w is gone: a replay divergence
            loss.grad[None] = 1
            k.grad()
    return SimpleNamespace(step=k, before=before, after=after, fields=[x, loss, x.grad])


def test_a_sweep_after_every_call_keeps_the_calls_plain_and_checked(mode):
    """kernel.grad() after each call differentiates the call's launch: the captured function
    is never replayed (a replay keeps no record of each launch), and every sweep is checked."""
    assert _compare(mode, "error", lambda: _forward_then_sweep(True)) == 0


def test_a_sweep_after_a_replay_says_it_is_unchecked_and_stops_the_replays(mode):
    """The one case a replay cannot check as the plain call would: a kernel.grad() after it of
    a launch it made, when the calls before were not followed by one. It says so, and the
    function runs plainly from then on."""
    ti.init(mode=mode, default_fp=ti.f64)
    prog = _forward_then_sweep(False)
    captured = ti.capture(prog.step)
    for n in range(CALLS - 1):
        prog.before(n)
        captured()
    prog.before(CALLS - 1)
    captured()
    replays = captured.replays
    if mode == "interp":
        with pytest.raises(ti.ReplayDivergenceRuleError):
            prog.after(CALLS - 1)
        return
    assert replays >= 1
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        prog.after(CALLS - 1)
    assert "k.grad() belongs to a launch that ran in a checked replay of k" in err.getvalue()
    assert "not checked" in err.getvalue()
    prog.before(0)
    captured()
    assert captured.replays == replays       # plain again


def test_every_attribute_of_the_checker_is_declared(mode):
    """A checked replay sets the checker's state entry by entry (tinyad/checkstate.py): an
    attribute it does not know of keeps every call plain. A new one must be declared there."""
    from tinyad import checkstate
    ti.init(mode=mode, default_fp=ti.f64)
    prog = _gravity()
    captured = ti.capture(prog.step)
    for n in range(3):
        prog.before(n)
        captured()
    if mode == "fast":
        assert checkstate.undeclared(runtime.backend.checker) == []
        assert captured.replays >= 1


def test_a_checked_program_compiling_beside_the_calls_replays_once_ready(mode, monkeypatch):
    """By default a captured program compiles in compile/ahead.py's helper process: checked
    calls meanwhile run plainly (and are watched), with the plain calls' values and checker
    state; once ready, they replay, alike."""
    monkeypatch.delenv("TINYAD_COMPILE_AHEAD")
    plain, _ = _run(mode, "error", _gravity, captured=False)
    ti.init(mode=mode, check="error", default_fp=ti.f64, random_seed=3)
    prog = _gravity()
    captured = ti.capture(prog.step)
    checker = runtime.backend.checker if mode == "fast" else None
    for n in range(CALLS):
        if n == 2:
            captured.wait()
            replays = captured.replays
        prog.before(n)
        captured()
        after = _outcome(functools.partial(prog.after, n))
        assert after == plain[n][1]
        for a, b in zip(plain[n][2], [runtime.backend.storage.to_host(f) for f in prog.fields]):
            np.testing.assert_array_equal(a, b, err_msg=f"call {n}")
        if checker is not None:
            assert differences(plain[n][3][-1], state(checker)) == [], f"call {n}"
    assert captured.replays == replays + (CALLS - 2) * (mode == "fast")


def test_a_time_from_before_the_call_that_it_did_not_read_keeps_it_plain():
    """A replay moves the times a watched call wrote to its own (tinyad/checkstate.py
    Renumber): a time the call wrote that is older than the call can be moved only where the
    call read it (its guards say where it is now). Otherwise the call is not replayed."""
    from tinyad import checkstate as cs
    from tinyad.checkwatch import _unmovable
    call = cs.Clocks(10, 5, 0, 0)        # the call began at tick 10, version 5
    read = [("checker", "grad_read_at", "g", "T", ("T", 7))]
    watched = SimpleNamespace(clocks=call, guards=read, writes=[])
    for written, why in [(("T", 7), None), (("T", 12), None),
                         (("T", 6), "holds a time from before the call"),
                         (("V", 3), "holds a version from before the call")]:
        kind = written[0]
        watched.writes = [("checker", "grad_read_at", "g", kind, written[1])]
        said = _unmovable(watched)
        assert (said is None) if why is None else (why in said), (written, said)
