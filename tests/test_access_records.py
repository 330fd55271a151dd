"""A launch's recorded accesses (tinyad/check/accessrecord.py, judged by tinyad/check/trail.py).

Each program breaks a rule within one launch in a way neither the IR nor the indices alone
settle (or is a clean twin of one), so the launch runs its kernel's recording variant: walked by
the interpreter in interp mode, compiled in fast mode. Both modes must raise the same rule at
the same element, or say nothing, and the clean twins' gradients are the analytic ones.
"""
import numpy as np
import pytest

import tinyad as ti
from tinyad.compile import backend as fast_backend
from tinyad.runtime import runtime

N = 16


@pytest.fixture
def recorded(mode):
    """`mode` (fast mode records every in-launch hazard the IR and the indices leave open)."""
    return mode


def fields():
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    y = ti.field(ti.f64, shape=N, needs_grad=True)
    pos = ti.field(ti.f64, shape=N)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.linspace(0.5, 1.5, N))
    pos.from_numpy((np.arange(N) + 0.5) / N)       # (int)(pos[i] * N) == i
    return x, y, pos, loss


def used_records(mode, kernel) -> None:
    """The kernel's launch ran its recording variant (compiled in fast mode, walked by the
    interpreter in interp mode)."""
    traced = kernel.ir_for({})
    assert any(key[0] is traced and r is not None
               for key, r in runtime.backend.recorders.items())


def raised_in_tape(mode, error, kernel, loss):
    """Run `kernel` in a Tape: it must raise `error` (in fast mode, from its recorded
    accesses); -> the error's report."""
    with pytest.raises(error) as info:
        with ti.ad.Tape(loss):
            kernel()
    used_records(mode, kernel)
    return info.value.report


def test_a_scatter_through_float_indices_in_a_branch(recorded):
    x, y, pos, loss = fields()

    @ti.kernel
    def scatter():
        for i in x:
            j = ti.cast(pos[i] * N, ti.i32)
            if x[i] > 0.0:
                y[j] = x[i] * 3.0
        for i in y:
            loss[None] += y[i] * y[i]

    with ti.ad.Tape(loss):
        scatter()
    np.testing.assert_allclose(x.grad.to_numpy(), 18.0 * x.to_numpy(), rtol=1e-12)
    used_records(recorded, scatter)
    pos[5] = 4.5 / N                              # iterations 4 and 5 both store y[4]
    report = raised_in_tape(recorded, ti.ParallelConflictRuleError, scatter, loss)
    assert report.element == (4,) and "both store" in report.summary
    assert {a.iteration for a in (*report.earlier, report.write)} == {4, 5}


def test_a_recurrence_in_a_branch_reads_another_iterations_element(recorded):
    x, _, _, loss = fields()
    th = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def recurrence():
        for i in range(N - 1):
            if th[None] >= 0:                     # (a branch: no index-only check)
                x[i + 1] = x[i] * 0.5 + th[None]

    report = raised_in_tape(recorded, ti.ParallelConflictRuleError, recurrence, loss)
    assert report.element == (1,)
    assert (report.write.iteration, report.read.iteration) == (0, 1)


def test_a_conflict_names_the_iteration_that_writes(recorded):
    """Every iteration reads z, the last one writes it (a cloth program moved its pinned
    corner so): the report pairs the first read with that write. Fast mode's records named
    iteration 1's read as the write."""
    x, _, _, loss = fields()
    z = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def move_corner():
        for i in range(N):
            x[i] = z[None] * 2
            if i == N - 1:
                z[None] = 1.0

    report = raised_in_tape(recorded, ti.ParallelConflictRuleError, move_corner, loss)
    assert (report.read.iteration, report.read.kind) == (0, "read")
    assert (report.write.iteration, report.write.kind) == (N - 1, "store")
    assert report.write.loc.text.strip() == "z[None] = 1.0"


def test_store_read_store_in_one_iteration_through_float_indices(recorded):
    x, y, pos, loss = fields()

    @ti.kernel
    def twice():
        for i in x:
            j = ti.cast(pos[i] * N, ti.i32)
            y[j] = x[i]
            y[j] = y[j] * x[i]          # the read of y[j] is replayed, then y[j] changes
        for i in y:
            loss[None] += y[i]

    report = raised_in_tape(recorded, ti.SecondWriteRuleError, twice, loss)
    assert report.element == (0,)


def test_read_then_accumulate_into_one_element_in_one_iteration(recorded):
    x, y, pos, loss = fields()

    @ti.kernel
    def grow():
        for i in x:
            j = ti.cast(pos[i] * N, ti.i32)
            loss[None] += y[j] * y[j]
            y[j] += x[i]                # after the replayed read of y[j]
    y.from_numpy(np.ones(N))
    report = raised_in_tape(recorded, ti.ReadThenOverwriteRuleError, grow, loss)
    assert report.element == (0,)


def test_clean_twins_store_then_read_and_shared_reads(recorded, capsys):
    x, y, pos, loss = fields()

    @ti.kernel
    def clean():
        for i in x:
            j = ti.cast(pos[i] * N, ti.i32)
            y[j] = x[i] * x[i]          # stored, then read in the same iteration: harmless
            loss[None] += y[j] * pos[0] + x[(i + 1) % N]   # x read by two iterations

    with ti.ad.Tape(loss):
        clean()
    xs = x.to_numpy()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * xs * pos[0] + 1, rtol=1e-12)
    assert "Rule" not in capsys.readouterr().err
    used_records(recorded, clean)


def test_a_nested_range_loop_is_recorded_per_inner_iteration(recorded):
    """`for i in range(n): for j in range(m)`, Taichi's usual 2-D loop (the inner one serial):
    a site in the inner loop has a column per inner iteration."""
    grid = ti.field(ti.f64, shape=(N, 4), needs_grad=True)
    x, _, pos, loss = fields()

    @ti.kernel
    def smear():
        for i in range(N):
            for j in range(4):
                row = ti.cast(pos[i] * N, ti.i32)
                grid[row, j] = x[i] * (j + 1)
        for i, j in grid:
            loss[None] += grid[i, j]

    with ti.ad.Tape(loss):
        smear()
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, 10.0), rtol=1e-12)
    used_records(recorded, smear)
    pos[9] = 8.5 / N                              # iterations 8 and 9 both store row 8
    with pytest.raises(ti.ParallelConflictRuleError) as info:
        with ti.ad.Tape(loss):
            smear()
    assert info.value.report.element == (8, 0)


def test_an_access_in_a_loop_of_unknown_length_is_recorded(recorded, capsys):
    """Accesses in a loop whose length is known only when it runs take trail rows through an
    atomic cursor (tinyad/check/accessrecord.py): checked, where fast mode said "unchecked"."""
    x, y, pos, loss = fields()

    @ti.kernel
    def inner():
        for i in x:
            for k in range(ti.cast(pos[0] + 1.0, ti.i32)):   # one pass, not a constant
                j = ti.cast(pos[i] * N, ti.i32)
                y[j] = x[i] * 2.0
        for i in y:
            loss[None] += y[i]

    with ti.ad.Tape(loss):
        inner()
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, 2.0), rtol=1e-12)
    assert "unchecked" not in capsys.readouterr().err
    used_records(recorded, inner)
    pos[5] = 4.5 / N                              # iterations 4 and 5 both store y[4]
    report = raised_in_tape(recorded, ti.ParallelConflictRuleError, inner, loss)
    assert report.element == (4,) and "both store" in report.summary
    assert {a.iteration for a in (*report.earlier, report.write)} == {4, 5}


def test_serial_code_before_the_loop_is_recorded(recorded, capsys):
    """An access outside the parallel loops (serial code, no iteration) is recorded too: the
    recurrence after it is a parallel conflict in both modes."""
    x, _, _, loss = fields()
    th = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def recurrence_after_a_read():
        th[None] += x[0] * 0.0      # outside the loop
        for i in range(N - 1):
            if th[None] >= 0:
                x[i + 1] = x[i] * 0.5 + th[None]

    report = raised_in_tape(recorded, ti.ParallelConflictRuleError, recurrence_after_a_read,
                            loss)
    assert report.element == (1,)
    assert (report.write.iteration, report.read.iteration) == (0, 1)
    assert "unchecked" not in capsys.readouterr().err


def test_a_while_loop_rereads_its_condition(recorded):
    """A while loop's condition reads again after each pass: a pass that changes what the
    condition read breaks Rule 1 at the condition's line, in both modes."""
    _, _, _, loss = fields()
    c = ti.field(ti.f64, shape=4, needs_grad=True)
    c.from_numpy(np.array([0.5, 0.25, 0.75, 1.0]))

    @ti.kernel
    def halve_until_small():
        for i in c:
            while c[i] > 0.2:
                c[i] = c[i] * 0.5
            loss[None] += c[i]

    report = raised_in_tape(recorded, ti.ReadThenOverwriteRuleError, halve_until_small, loss)
    assert report.field == "c" and report.element == (0,)
    assert "while c[i] > 0.2" in report.read.loc.text


def test_a_trail_that_outgrows_its_room_runs_the_launch_again(recorded):
    """More trail rows than the first room (4,096): the launch runs again with room enough,
    from the values before it, so the result counts each access once."""
    x, y, pos, loss = fields()
    reps = ti.field(ti.i32, shape=())
    reps[None] = 400                               # 16 x 400 x 2 accesses

    @ti.kernel
    def spread():
        for i in x:
            j = ti.cast(pos[i] * N, ti.i32)
            for k in range(reps[None]):
                y[j] = y[j] + x[i] * 0.001
        for i in y:
            loss[None] += y[i] * y[i]

    with ti.ad.Tape(loss):
        spread()
    used_records(recorded, spread)
    if recorded == "fast":
        assert max(r.rows.room for r in runtime.backend.recorders.values() if r) > 4096
    expected_y = x.to_numpy() * 0.4
    np.testing.assert_allclose(y.to_numpy(), expected_y, rtol=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * expected_y * 0.4, rtol=1e-12)


def test_the_conflict_named_is_the_first_to_arise(recorded):
    """Iterations 0 and N-1 store y[0]; iterations 1 and 2 store y[5]: the conflict on y[5]
    arises first (at iteration 2), so both modes name it, as the interpreter meets them."""
    x, y, pos, loss = fields()
    j_of = np.arange(N, dtype=float)
    j_of[[N - 1, 1, 2]] = [0, 5, 5]
    j_of[5] = N - 1                                # (N - 1's own element, now free)
    pos.from_numpy((j_of + 0.5) / N)

    @ti.kernel
    def scatter():
        for i in x:
            j = ti.cast(pos[i] * N, ti.i32)
            if x[i] > 0.0:
                y[j] = x[i] * 3.0

    report = raised_in_tape(recorded, ti.ParallelConflictRuleError, scatter, loss)
    assert report.element == (5,)
    assert {a.iteration for a in (*report.earlier, report.write)} == {1, 2}


def test_kernel_checked_ir_shows_the_variant_a_launch_runs(recorded):
    """`kernel.checked.ir` prints the recording variant, the one the launch ran; a kernel whose
    IR settles every field's accesses has none: its checked IR is its own."""
    x, y, pos, loss = fields()

    @ti.kernel
    def scatter():
        for i in x:
            y[ti.cast(pos[i] * N, ti.i32)] = x[i] * 3.0

    @ti.kernel
    def in_place():
        for i in x:
            y[i] = x[i] * 3.0

    scatter()
    ran = [r for key, r in runtime.backend.recorders.items()
           if key[0] is scatter.ir_for({}) and r is not None]
    assert len(ran) == 1 and str(scatter.checked.ir) == str(ran[0].ir)
    printed = str(scatter.checked.ir)
    assert "_touched_scatter_0[i, 0] = i64(i32(pos[i] * 16.0))" in printed, printed
    assert scatter.checked.ir is not scatter.ir
    assert in_place.checked.ir is in_place.ir
