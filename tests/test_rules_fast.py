"""How the checker checks the rules (tinyad/check/regions.py, tinyad/check/replaycheck.py): the
boxes each access may touch, the copies of what adjoints replay, and the in-launch hazards the
IR settles or leaves to a recording. test_rules.py runs every rule in both modes; these pin down
the machinery, most of them in fast mode."""
import numpy as np
import pytest

import tinyad as ti
from tinyad.compile import backend as fast_backend
from tinyad.check.regions import regions_of
from tinyad.runtime import runtime


@pytest.fixture
def fast():
    ti.init(mode="fast", default_fp=ti.f64)
    return runtime.backend


def test_a_time_indexed_kernel_copies_only_the_rows_it_reads(fast):
    steps, n = 50, 16
    x = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.random.default_rng(0).random((steps + 1, n)))

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            x[t + 1, i] = ti.sin(x[t, i]) * x[t, i]

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += x[steps, i] ** 2

    with ti.ad.Tape(loss):
        for t in range(steps):
            step(t)
        total()
        launches = [launch for launch in fast.checker.history if launch.kernel == "step"]
        assert len(launches) == steps
        for t, launch in enumerate(launches):   # no later write comes near row t: unfiled
            assert [p.box for p in launch.waiting[0].reads] == [((t, t + 1), (0, n))]
            assert launch.snapshots == ()
        assert fast.checker.waiting_spans[x] == (0, steps + 1)    # (total reads row steps)
        assert fast.checker.kept_bytes == 0
    # the backward pass has run: nothing it replayed is watched any more
    assert all(launch.snapshots == () and launch.waiting is None for launch in launches)
    assert not fast.checker.waiting_spans and not any(fast.checker.reads.overlapping(x, None))
    assert not fast.recorders          # the IR settled every launch: nothing recorded


def test_the_compiled_witness_names_writer_and_rule_without_the_interpreter(fast):
    x = ti.field(ti.f64, shape=(3, 4), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.arange(12.0).reshape(3, 4))

    @ti.kernel
    def use(t: ti.i32):
        for i in range(4):
            loss[None] += x[t, i] ** 2

    @ti.kernel
    def scale_row(t: ti.i32):
        for i in range(4):
            x[t, i] = x[t, i] * 2

    with ti.ad.Tape(loss):
        use(1)
        scale_row(2)          # another row: nothing the adjoint of use(1) replays
    assert np.allclose(x.grad.to_numpy()[1], 2 * x.to_numpy()[1])
    with pytest.raises(ti.ReadThenOverwriteRuleError) as info:
        with ti.ad.Tape(loss):
            use(1)
            scale_row(1)
    report = info.value.report
    assert report.element_text == "x[1, 0]"          # the first element the adjoint replays
    assert (report.read.kernel, report.write.kernel) == ("use", "scale_row")
    assert (report.read.value, report.write.value) == (4.0, 8.0)
    assert not fast.recorders          # the compiled witness, not a recording, found it
    assert report.read.loc.text.strip() == "loss[None] += x[t, i] ** 2"
    assert report.write.loc.text.strip() == "x[t, i] = x[t, i] * 2"


def _row_kernels(x, loss):
    """use(t) adds row t of x squared to the loss; scale_row(t) doubles row t."""
    @ti.kernel
    def use(t: ti.i32):
        for i in range(x.shape[1]):
            loss[None] += x[t, i] ** 2

    @ti.kernel
    def scale_row(t: ti.i32):
        for i in range(x.shape[1]):
            x[t, i] = x[t, i] * 2

    return use, scale_row


def test_waiting_reads_are_filed_when_a_write_comes_near_their_rows(fast):
    x = ti.field(ti.f64, shape=(10, 4), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.arange(40.0).reshape(10, 4))
    use, scale_row = _row_kernels(x, loss)
    with ti.ad.Tape(loss):
        use(0)
        use(9)
        first, last = list(fast.checker.history)[-2:]
        assert fast.checker.waiting_spans[x] == (0, 10) and first.waiting and last.waiting
        before = x.to_numpy()
        scale_row(5)    # inside the rows' hull, though no read of row 5: filed, no report
        assert first.waiting is None and first.snapshots and last.snapshots
    grad = np.zeros((10, 4))
    grad[[0, 9]] = 2 * before[[0, 9]]           # d/dx of x^2 on the rows used
    assert np.allclose(x.grad.to_numpy(), grad)
    with pytest.raises(ti.ReadThenOverwriteRuleError) as info, ti.ad.Tape(loss):
        use(0)
        use(9)
        scale_row(5)
        scale_row(9)         # row 9, filed at scale_row(5), now changes
    report = info.value.report
    assert report.element_text == "x[9, 0]"
    assert (report.read.kernel, report.write.kernel) == ("use", "scale_row")
    assert (report.read.value, report.write.value) == (36.0, 72.0)


def test_a_waiting_read_sees_a_change_after_older_ones_left_the_history(monkeypatch):
    from tinyad.check import launches
    monkeypatch.setattr(launches, "HISTORY", 8)
    ti.init(mode="fast", default_fp=ti.f64)
    fast = runtime.backend
    x = ti.field(ti.f64, shape=(100, 4), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.arange(400.0).reshape(100, 4))
    use, _ = _row_kernels(x, loss)
    checker = fast.checker
    for t in range(100):
        use(t)          # launches past the history of 8 are let go, and their rows with them
        assert len(checker.waiting) <= 2 * 9 + 64
        for launch in checker.history:     # each launch kept still waits, its row covered
            lo, hi = checker.waiting_spans[x]
            assert launch in checker.waiting and lo <= launch.scalars[0] < hi
    assert checker.waiting_spans[x][0] > 0
    x[99, 1] = -1.0     # what the latest launch read
    loss.grad[None] = 1
    with pytest.raises(ti.ReplayDivergenceRuleError) as info:
        use.grad(99)
    assert (info.value.report.element_text, info.value.report.read.value) == ("x[99, 1]", 397.0)


def test_rounding_is_no_change_but_a_real_change_is(fast):
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))

    @ti.kernel
    def cube():
        for i in x:
            loss[None] += x[i] ** 3

    cube()
    x[1] = np.nextafter(2.0, 3.0)            # one ulp: what a recomputed parallel sum may do
    loss.grad[None] = 1
    cube.grad()
    x[1] = 2.001
    ti.ad.clear_all_gradients()
    cube()
    x[1] = 2.5
    loss.grad[None] = 1
    with pytest.raises(ti.ReplayDivergenceRuleError) as info:
        cube.grad()
    assert (info.value.report.read.value, info.value.report.write.value) == (2.001, 2.5)
    assert info.value.report.write.loc.text.strip() == "x[1] = 2.5"


def test_in_launch_hazards_the_ir_settles(fast):
    n = 6
    p = ti.field(ti.f64, shape=(4, n, n), needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)
    f = ti.field(ti.f64, shape=n + 1, needs_grad=True)

    @ti.kernel
    def stencil(t: ti.i32):        # reads rows t, t - 1 and writes row t + 1: disjoint boxes
        for i, j in ti.ndrange((1, n - 1), (1, n - 1)):
            p[t + 1, i, j] = p[t, i + 1, j] * p[t, i - 1, j] - p[t - 1, i, j]

    @ti.kernel
    def store_then_read():         # each iteration its own element, the store first
        for i in y:
            y[i] = ti.sin(y[i] + 1.0)
            y[i] = y[i] * y[i]

    @ti.kernel
    def recurrence():              # reads f[i], writes f[i + 1]: another iteration's element
        for i in range(n):
            f[i + 1] = f[i] * f[i]

    @ti.func
    def get_p(t, i, j):            # DiffTaichi's wave: a guarded read through locals t - 2, j - 1
        return p[t, i, j] if 0 <= i < n and 0 <= j < n else 0.0

    @ti.kernel
    def guarded(t: ti.i32):
        for i in range(n):
            for j in range(n):
                p[t, i, j] = get_p(t - 1, i, j - 1) * get_p(t - 2, i + 1, j)

    assert regions_of(stencil.ir_for({})).boxes((1,))[3] == []
    assert regions_of(stencil.ir_for({})).boxes((1,))[1][0].box == ((2, 3), (1, n - 1), (1, n - 1))
    assert regions_of(guarded.ir_for({})).boxes((3,))[3] == []       # its locals have bounds
    assert sorted(r[1] for r in regions_of(guarded.ir_for({})).boxes((3,))[0]) == [
        ((1, 2), (1, n), (0, n)), ((2, 3), (0, n), (0, n - 1))]
    assert list(regions_of(store_then_read.ir_for({})).unproven) == [y]   # a read, then a store
    assert regions_of(recurrence.ir_for({})).boxes(())[3] == [f]


def test_a_scatter_through_float_indices_is_checked_at_mid_size(mode, capsys):
    """Two iterations storing one element through indices computed from a float field (no IR
    proof, no index-only check): at 30,000 elements fast mode records the launch's accesses
    (it said "unchecked" past 20,000 before) and raises what interp mode raises. Without the
    collision the gradient is the analytic one."""
    n = 10_000
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n)
    z = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def scatter():
        for i in x:
            j = ti.cast(y[i] * n, ti.i32)
            if x[i] > 0.0:
                z[j] = x[i] * 3.0

    @ti.kernel
    def total():
        for i in z:
            loss[None] += z[i] * z[i]

    x.from_numpy(np.linspace(0.5, 1.5, n))
    y.from_numpy((np.arange(n) + 0.5) / n)    # j = i: every iteration its own element
    with ti.ad.Tape(loss):
        scatter()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 18.0 * x.to_numpy(), rtol=1e-12)
    assert "unchecked" not in capsys.readouterr().err
    assert [r for r in runtime.backend.recorders.values() if r is not None]
    y[7] = 6.5 / n                            # iterations 6 and 7 both store z[6]
    with pytest.raises(ti.ParallelConflictRuleError) as info:
        with ti.ad.Tape(loss):
            scatter()
            total()
    assert info.value.report.element == (6,)


def test_copies_past_the_memory_budget_are_dropped_and_said_so(fast, capsys, monkeypatch):
    monkeypatch.setattr(type(fast.checker), "MEMORY_BUDGET", 3 * 8 * 100)
    x = ti.field(ti.f64, shape=100, needs_grad=True)
    idx = ti.field(ti.i32, shape=100)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def gather():
        for i in x:
            loss[None] += x[idx[i]] ** 2     # a gather: the whole of x is copied

    for _ in range(5):
        gather()      # nothing writes x or idx after: nothing is copied
    assert fast.checker.kept_bytes == 0
    x[0] = 5          # before the write, x is copied once for all five launches (one read)
    assert fast.checker.kept_bytes == 8 * 100
    assert "dropped" not in capsys.readouterr().err
    for i in range(5):
        gather()
        x[0] = i      # x changes: each launch's read is copied before
    kept = [launch for launch in fast.checker.history if launch.snapshots]
    assert 0 < len(kept) < 10 and fast.checker.kept_bytes <= 3 * 8 * 100
    assert "dropped, so their replays go unchecked" in capsys.readouterr().err


def test_a_gradient_point_is_copied_row_by_row_and_still_sees_a_changed_row(fast, monkeypatch):
    from tinyad.check import pointcopies
    monkeypatch.setattr(pointcopies, "SMALL_FIELD", 0)     # (small fields are copied whole)
    x = ti.field(ti.f64, shape=(4, 3), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.arange(12.0).reshape(4, 3) / 10)

    @ti.kernel
    def total():
        for t, i in x:
            loss[None] += x[t, i] ** 2

    @ti.kernel
    def rewrite_row(t: ti.i32, factor: ti.f64):
        for i in range(3):
            x[t, i] = x[t, i] * factor

    loss.grad[None] = 1.0
    total()
    total.grad()
    rewrite_row(1, 1.0)       # the same values again: still the same point
    total()
    total.grad()              # adds at the same values of x (a warning at most)
    point = fast.checker.partial_points[x]
    assert point.saved == {((1, 2), (0, 3))}          # the row written, not the field
    rewrite_row(2, 2.0)       # x moves, row 2 only: the point taken last keeps it
    assert fast.checker.partial_points[x] is point          # (in the same buffer)
    assert point.saved == {((2, 3), (0, 3))}
    total()
    with pytest.raises(ti.StaleGradientRuleError):
        total.grad()


def test_a_manual_sweep_lets_go_of_what_no_grad_can_replay_again(fast):
    """A checkpointed sweep (mpm's): a scratch field rewritten at every step is copied before
    each rewrite. A launch differentiated already and no longer the latest alike cannot be
    found by a .grad() again: its copies are let go (they were kept until it left the history,
    490 MB for mpm) and their arrays serve the next copies. The latest alike keeps its copies,
    so a .grad() of it again after a write is still caught."""
    steps, n = 6, 5
    x = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
    scratch = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x0 = np.linspace(0.1, 0.9, n)

    @ti.kernel
    def fill(t: ti.i32):
        for i in range(n):
            scratch[i] = ti.sin(x[t, i])

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            x[t + 1, i] = x[t, i] + scratch[i] ** 2

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += x[steps, i] ** 2

    def forward_and_sweep():
        x.from_numpy(np.vstack([x0, np.zeros((steps, n))]))
        loss.fill(0)
        ti.ad.clear_all_gradients()
        for t in range(steps):
            fill(t)
            step(t)
        total()
        loss.grad[None] = 1
        total.grad()
        for t in reversed(range(steps)):
            fill(t)                        # recompute the scratch step t read
            step.grad(t)
            fill.grad(t)

    checker = fast.checker
    forward_and_sweep()
    kept = checker.kept_bytes
    assert kept > 0                        # the latest step(t)s' copies of scratch
    forward_and_sweep()                    # the first sweep's launches are let go
    assert checker.kept_bytes == kept and checker.buffers.free
    xs = [x0]
    for _ in range(steps):
        xs.append(xs[-1] + np.sin(xs[-1]) ** 2)
    # d/dx0 of sum x_T^2, x_(t+1) = x_t + sin(x_t)^2: 2 x_T prod(1 + sin(2 x_t))
    expected = 2 * xs[-1] * np.prod([1 + np.sin(2 * xt) for xt in xs[:-1]], axis=0)
    assert np.allclose(x.grad.to_numpy()[0], expected)
    scratch[0] = 5.0     # what the latest step(0) replays
    ti.ad.clear_all_gradients()
    with pytest.raises(ti.ReplayDivergenceRuleError) as info:
        step.grad(0)
    assert info.value.report.element_text == "scratch[0]"


def test_a_static_loop_reading_columns_files_one_read(fast):
    """DiffTaichi's rigid_body reads a weight matrix column by column in a ti.static loop: 30
    replayed reads a launch, compared pairwise and planned again at every step. Boxes of one
    field and line that meet are joined into one; a box no argument moves is planned once."""
    n, m = 4, 6
    w = ti.field(ti.f64, shape=(n, m), needs_grad=True)
    x = ti.field(ti.f64, shape=(8, n), needs_grad=True)
    h = ti.field(ti.f64, shape=(8, m), needs_grad=True)

    @ti.kernel
    def layer(t: ti.i32):
        for i in range(n):
            for j in ti.static(range(m)):
                h[t, j] += ti.tanh(w[i, j] * x[t, i])

    regions = regions_of(layer.ir_for({}))
    reads = {r[0].field.name: r[1] for r in regions.boxes((2,))[0]}
    assert reads == {"w": ((0, n), (0, m)), "x": ((2, 3), (0, n))}
    fixed = [r for r in regions.plan((2,)).reads if r.field is w]
    assert fixed == [r for r in regions.plan((5,)).reads if r.field is w]   # the same object


def test_a_recompute_of_a_kernel_launched_alike_every_step_lets_its_forward_launch_go(fast):
    # DiffTaichi's checkpointing: grid_op takes no argument, so every step's launch is alike.
    # The backward's recompute at step s stands for the forward's launch at step s (the latest
    # alike not yet differentiated), so one adjoint differentiates both and the forward's
    # copies go: kept, they would pile up, a grid a step, until they left the history.
    steps, n = 6, 8
    x = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
    grid = ti.field(ti.f64, shape=n, needs_grad=True)
    out = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.random.default_rng(1).random((steps + 1, n)))

    @ti.kernel
    def scatter(s: ti.i32):
        for i in range(n):
            grid[i] = x[s, i]

    @ti.kernel
    def grid_op():
        for i in range(n):
            out[i] = ti.sin(grid[i])

    @ti.kernel
    def gather(s: ti.i32):
        for i in range(n):
            x[s + 1, i] = x[s, i] + out[i] * out[i]

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += x[steps, i]

    for s in range(steps):
        scatter(s)
        grid_op()
        gather(s)
    total()
    forward_ops = [launch for launch in fast.checker.history if launch.kernel == "grid_op"]
    assert all(launch.snapshots for launch in forward_ops[:-1])   # overwritten: copied
    loss.grad[None] = 1
    total.grad()
    for s in reversed(range(steps)):
        scatter(s)
        grid_op()
        gather.grad(s)
        grid_op.grad()
        scatter.grad(s)
    assert all(launch.adjoint_runs and launch.snapshots == () for launch in forward_ops)
    held = [launch for launch in fast.checker.history if launch.snapshots]
    assert all(launch.kernel != "grid_op" or launch is fast.checker.history[-2]
               for launch in held)
    dx = 2 * np.cos(x.to_numpy()[:-1]) * np.sin(x.to_numpy()[:-1])      # d out^2 / dx
    expected = np.ones(n)
    for s in reversed(range(steps)):
        expected = expected * (1 + dx[s])
    np.testing.assert_allclose(x.grad.to_numpy()[0], expected, rtol=1e-12)
