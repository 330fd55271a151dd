"""The rule checker: for every check, programs that break it (each must raise the right rule
naming both source lines) and a clean twin (it must give the true gradient, checked by finite
differences, with no report at all)."""
import re

import numpy as np
import pytest
from gradcheck import finite_difference

import tinyad as ti

pytestmark = pytest.mark.filterwarnings("error::tinyad.NonDifferentiableWarning")


def line_text(access):
    return access.loc.text.strip()


def assert_no_report(capsys):
    err = capsys.readouterr().err
    assert "Rule" not in err and "warning" not in err.lower(), err


@pytest.fixture
def scalars(mode):
    """x (4 elements), b and loss (0-D), all with gradients."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    b = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.array([0.5, 1.5, -1.0, 2.0]))
    b[None] = 3.0
    return x, b, loss


# ---- Global Data Access Rule 1: read, then changed ----------------------------------------------

def test_rule1_across_kernels_in_a_tape(scalars):
    x, b, loss = scalars

    @ti.kernel
    def use_b():
        loss[None] += x[0] * b[None]

    @ti.kernel
    def bump_b():
        b[None] = b[None] + 1.0

    with pytest.raises(ti.ReadThenOverwriteRuleError) as info:
        with ti.ad.Tape(loss=loss):
            use_b()
            bump_b()
    report = info.value.report
    assert report.rule == "Global Data Access Rule 1" and report.element_text == "b[]"
    assert line_text(report.read) == "loss[None] += x[0] * b[None]"
    assert line_text(report.write) == "b[None] = b[None] + 1.0"
    assert (report.read.kernel, report.write.kernel) == ("use_b", "bump_b")
    assert (report.read.value, report.write.value) == (3.0, 4.0)
    assert "time-indexed" in report.fix


def test_rule1_a_vector_read_then_cleared_by_fill(mode):
    """DFSPH_difftaichi's rigid-body step: omega[t + 1] = omega[t] + dt * inv_inertia * torque[t],
    then torque[t].fill(0.0) in the same iteration: the adjoint of inv_inertia would replay a
    zero torque. (A read whose value no adjoint needs, as in omega + dt * torque, is no fault.)"""
    torque = ti.Vector.field(2, ti.f64, shape=(2, 1), needs_grad=True)
    inv_inertia = ti.field(ti.f64, shape=1, needs_grad=True)
    omega = ti.Vector.field(2, ti.f64, shape=(2, 1), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    torque[0, 0] = [0.5, 2.0]

    @ti.kernel
    def step(t: int):
        for r in range(1):
            omega[t + 1, r] = omega[t, r] + 0.1 * inv_inertia[r] * torque[t, r]
            torque[t, r].fill(0.0)

    @ti.kernel
    def total():
        loss[None] = omega[1, 0].sum()

    with pytest.raises(ti.ReadThenOverwriteRuleError) as info:
        with ti.ad.Tape(loss=loss):
            step(0)
            total()
    report = info.value.report
    assert report.element_text == "torque[0, 0, 0]" and report.read.value == 0.5
    assert line_text(report.write) == "torque[t, r].fill(0.0)"

    @ti.kernel
    def linear_step(t: int):
        for r in range(1):
            omega[t + 1, r] = omega[t, r] + 0.1 * torque[t, r]
            torque[t, r].fill(0.0)

    torque[0, 0] = [0.5, 2.0]
    with ti.ad.Tape(loss=loss):
        linear_step(0)
        total()
    assert torque.grad[0, 0].to_numpy().tolist() == [0.1, 0.1]
    assert torque[0, 0].to_numpy().tolist() == [0.0, 0.0]


def _ewma_fields(row_num, column_num):
    data = ti.field(ti.f64, shape=(row_num, column_num), needs_grad=True, name="data_field")
    tape = ti.field(ti.f64, shape=(row_num, column_num), needs_grad=True, name="ewma_tape")
    loss = ti.field(ti.f64, (), needs_grad=True, name="loss")
    data.from_numpy(np.random.default_rng(0).standard_normal((row_num, column_num)))
    return data, tape, loss


def test_rule1_integer_field_that_steers_indexing_seed003(mode):
    """Seed 003's calc_ewma_err: `sample[row] += 1` mutates the index the adjoint replays."""
    row_num, column_num = 1, 3
    data_field, ewma_tape, loss = _ewma_fields(row_num, column_num)
    sample = ti.field(ti.i32, shape=row_num)

    @ti.kernel
    def calc_ewma_err():
        for row in range(row_num):
            for col in range(column_num):
                col_idx = sample[row]
                if col_idx == 0:
                    ewma_tape[row, col_idx] = data_field[row, col_idx]
                else:
                    ewma_tape[row, col_idx] = ewma_tape[row, col_idx - 1] * 0.5 + data_field[row, col_idx] * 0.5
                sample[row] += 1  # Data Access Rule violation here

    with pytest.raises(ti.ReadThenOverwriteRuleError) as info:
        with ti.ad.Tape(loss):
            calc_ewma_err()
    report = info.value.report
    assert report.element_text == "sample[0]"
    assert line_text(report.read) == "col_idx = sample[row]"
    assert line_text(report.write) == "sample[row] += 1  # Data Access Rule violation here"


def test_rule1_clean_twin_seed003_time_indexed(mode, capsys):
    """Seed 003's fix (calc_ewma_ok), with its loss kernel's index corrected: the seed reads
    ewma_tape[row_num, ...], one past the end, which tinyad reports as out of bounds."""
    row_num, column_num = 2, 3
    data_field, ewma_tape, loss = _ewma_fields(row_num, column_num)
    sample_tape = ti.field(ti.i32, shape=(row_num, column_num))

    @ti.kernel
    def prepare_sample_tape():
        for row in range(row_num):
            for col in range(column_num):
                sample_tape[row, col] = col

    @ti.kernel
    def calc_ewma_ok():
        for row in range(row_num):
            for col in range(column_num):
                col_idx = sample_tape[row, col]
                if col_idx == 0:
                    ewma_tape[row, col_idx] = data_field[row, col_idx]
                else:
                    ewma_tape[row, col_idx] = ewma_tape[row, col_idx - 1] * 0.5 + data_field[row, col_idx] * 0.5

    @ti.kernel
    def calc_loss_as_seeded():
        for i in range(row_num):
            loss[None] += ewma_tape[row_num, column_num - 1] ** 2

    @ti.kernel
    def calc_loss():
        for i in range(row_num):
            loss[None] += ewma_tape[i, column_num - 1] ** 2

    prepare_sample_tape()
    if mode == "interp":   # fast mode checks bounds under ti.init(debug=True) (test_fast_backend)
        with pytest.raises(ti.TinyadIndexError, match="index \\(2, 2\\) is out of bounds for field ewma_tape"):
            calc_loss_as_seeded()

    def run():
        loss[None] = 0
        calc_ewma_ok()
        calc_loss()
        return loss[None]

    with ti.ad.Tape(loss):
        calc_ewma_ok()
        calc_loss()
    assert_no_report(capsys)
    expected = finite_difference(run, data_field)
    assert np.allclose(data_field.grad.to_numpy(), expected, rtol=1e-6, atol=1e-9)


# ---- Global Data Access Rule 2: a second plain write after a read ----------------------------

def test_rule2_store_read_store_in_one_iteration(scalars):
    x, _, loss = scalars
    y = ti.field(ti.f64, shape=4, needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            y[i] = x[i]
            y[i] = y[i] * x[i]
        for i in x:
            loss[None] += y[i]

    with pytest.raises(ti.SecondWriteRuleError) as info:
        with ti.ad.Tape(loss=loss):
            k()
    report = info.value.report
    assert report.rule == "Global Data Access Rule 2" and report.element_text == "y[0]"
    assert line_text(report.earlier[0]) == "y[i] = x[i]"
    assert line_text(report.read) == line_text(report.write) == "y[i] = y[i] * x[i]"


def test_rule2_clean_twins_store_store_and_store_then_read(scalars, capsys):
    x, _, loss = scalars
    y = ti.field(ti.f64, shape=4, needs_grad=True)
    z = ti.field(ti.f64, shape=4, needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            y[i] = x[i]              # overwritten before anyone reads it: harmless
            y[i] = 2 * x[i] * x[i]
            z[i] = y[i] * 3          # store, then read in the same iteration: harmless
        for i in x:
            loss[None] += z[i] + y[i]

    def run():
        loss[None] = 0
        k()
        return loss[None]

    with ti.ad.Tape(loss=loss):
        k()
    assert_no_report(capsys)
    assert np.allclose(x.grad.to_numpy(), 16 * x.to_numpy())
    assert np.allclose(x.grad.to_numpy(), finite_difference(run, x))


# ---- reading an element while it is being accumulated ---------------------------------------

def test_read_during_accumulation_in_one_kernel(scalars):
    x, _, loss = scalars
    s = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        s[None] += x[0]
        loss[None] = s[None] * s[None]
        s[None] += x[1]

    with pytest.raises(ti.ReadDuringAccumulationRuleError) as info:
        with ti.ad.Tape(loss=loss):
            k()
    report = info.value.report
    assert line_text(report.read) == "loss[None] = s[None] * s[None]"
    assert line_text(report.write) == "s[None] += x[1]"


def test_read_during_accumulation_across_kernels(scalars):
    x, _, loss = scalars
    s = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def accumulate():
        for i in x:
            s[None] += x[i]

    @ti.kernel
    def square():
        loss[None] += s[None] ** 2

    with pytest.raises(ti.ReadDuringAccumulationRuleError) as info:
        with ti.ad.Tape(loss=loss):
            accumulate()
            square()
            accumulate()
    assert (info.value.report.read.kernel, info.value.report.write.kernel) == ("square", "accumulate")


def test_read_after_accumulation_is_clean(scalars, capsys):
    x, _, loss = scalars
    s = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def accumulate():
        for i in x:
            s[None] += x[i]

    @ti.kernel
    def square():
        loss[None] += s[None] ** 2

    def run():
        s[None] = 0
        loss[None] = 0
        accumulate()
        accumulate()
        square()
        return loss[None]

    s[None] = 0
    with ti.ad.Tape(loss=loss):
        accumulate()
        accumulate()
        square()
    assert_no_report(capsys)
    assert np.allclose(x.grad.to_numpy(), finite_difference(run, x))


# ---- dependences between iterations of a parallel loop -------------------------------------------

def _recurrence_fields():
    f = ti.field(ti.f64, shape=9, needs_grad=True)
    th = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    th[None] = 1.0
    return f, th, loss


def test_parallel_loop_carried_dependence(mode):
    """Taichi gives th.grad = 1.0 here without a word; the true value is 1.992."""
    f, th, loss = _recurrence_fields()

    @ti.kernel
    def recurrence():
        for i in range(8):
            f[i + 1] = f[i] * 0.5 + th[None]

    with pytest.raises(ti.ParallelConflictRuleError) as info:
        with ti.ad.Tape(loss=loss):
            recurrence()
    report = info.value.report
    assert report.element_text == "f[1]"
    assert (report.write.iteration, report.read.iteration) == (0, 1)
    assert line_text(report.read) == line_text(report.write) == "f[i + 1] = f[i] * 0.5 + th[None]"
    assert "serialize=True" in report.fix


def test_parallel_plain_store_loss_and_scatter_collision(scalars):
    x, _, loss = scalars
    y = ti.field(ti.f64, shape=2, needs_grad=True)

    @ti.kernel
    def store_loss():
        for i in x:
            loss[None] = x[i] * x[i]

    @ti.kernel
    def scatter():
        for i in x:
            y[i // 2] = x[i]

    for kernel, element in ((store_loss, "loss[]"), (scatter, "y[0]")):
        with pytest.raises(ti.ParallelConflictRuleError) as info:
            with ti.ad.Tape(loss=loss):
                kernel()
        assert info.value.report.element_text == element
        assert "both store" in info.value.report.summary


def test_serialized_recurrence_is_clean_and_right(mode, capsys):
    f, th, loss = _recurrence_fields()

    @ti.kernel
    def recurrence():
        ti.loop_config(serialize=True)
        for i in range(8):
            f[i + 1] = f[i] * 0.5 + th[None]

    @ti.kernel
    def last():
        loss[None] = f[8]

    def run():
        f.fill(0)
        recurrence()
        last()
        return loss[None]

    with ti.ad.Tape(loss=loss):
        recurrence()
        last()
    assert_no_report(capsys)
    assert th.grad[None] == pytest.approx(2 * (1 - 0.5 ** 8))
    assert th.grad[None] == pytest.approx(finite_difference(run, th)[()])


# ---- replay divergence: the adjoint must replay what the forward read ---------------------------

@pytest.fixture
def cube(scalars):
    x, _, loss = scalars

    @ti.kernel
    def k():
        for i in x:
            loss[None] += x[i] ** 3

    return x, loss, k


def test_divergence_python_write_between_forward_and_grad(cube):
    x, loss, k = cube
    k()
    x[2] = 7.0
    loss.grad[None] = 1
    with pytest.raises(ti.ReplayDivergenceRuleError) as info:
        k.grad()
    report = info.value.report
    assert report.element_text == "x[2]" and (report.read.value, report.write.value) == (-1.0, 7.0)
    assert report.write.kernel is None and line_text(report.write) == "x[2] = 7.0"
    assert line_text(report.read) == "loss[None] += x[i] ** 3"


def test_divergence_kernel_outside_the_tape(cube):
    x, loss, k = cube

    @ti.kernel
    def shift():
        for i in x:
            x[i] = x[i] + 1

    k()
    shift()
    loss.grad[None] = 1
    with pytest.raises(ti.ReplayDivergenceRuleError) as info:
        k.grad()
    assert info.value.report.write.kernel == "shift"
    assert line_text(info.value.report.write) == "x[i] = x[i] + 1"


def test_a_tapes_launch_differentiated_again_after_a_write(cube, mode, capsys):
    """A manual .grad() of a launch its Tape already differentiated, after x changed: what
    the launch read is no longer kept (every Tape would pay for it), and the checker says the
    replay is unchecked, not silent."""
    x, loss, k = cube
    with ti.ad.Tape(loss=loss):
        k()
    assert x.grad.to_numpy() == pytest.approx(3 * x.to_numpy() ** 2)   # d(sum x^3)/dx
    k.grad()                       # nothing written since: the replay holds, no word
    assert "not checked" not in capsys.readouterr().err
    x[2] = 7.0
    x.grad.fill(0)
    k.grad()
    assert "again, after its adjoint ran; x has been written since" in capsys.readouterr().err


def test_a_gradient_taken_in_a_tape_names_its_with_line(cube):
    x, loss, k = cube
    with ti.ad.Tape(loss=loss):
        k()
    x[2] = 7.0                     # x.grad still holds the gradient at the old x
    loss.grad[None] = 1
    with pytest.raises(ti.StaleGradientRuleError) as info:
        k.grad()
    taken, added = info.value.report.earlier
    assert line_text(taken) == "with ti.ad.Tape(loss=loss):"
    assert line_text(added) == "k.grad()"


def test_python_write_inside_the_tape(cube):
    x, loss, k = cube
    with pytest.raises(ti.ReadThenOverwriteRuleError) as info:
        with ti.ad.Tape(loss=loss):
            k()
            x[1] = 0.0
    assert "Python scope" in info.value.report.summary
    assert line_text(info.value.report.write) == "x[1] = 0.0"


def test_random_on_the_gradient_path(scalars):
    x, _, loss = scalars

    @ti.kernel
    def noisy():
        for i in x:
            loss[None] += x[i] * ti.random()

    with pytest.raises(ti.ReplayDivergenceRuleError) as info:
        with ti.ad.Tape(loss=loss):
            noisy()
    assert "ti.random()" in info.value.report.summary
    assert line_text(info.value.report.read) == "loss[None] += x[i] * ti.random()"


def test_clean_twins_forward_then_grad_and_precomputed_noise(cube, capsys):
    x, loss, k = cube
    noise = ti.field(ti.f64, shape=4)

    @ti.kernel
    def draw():
        for i in noise:
            noise[i] = ti.random()

    @ti.kernel
    def noisy():
        for i in x:
            loss[None] += x[i] * noise[i]

    x[2] = 7.0
    k()
    loss.grad[None] = 1
    k.grad()
    assert np.allclose(x.grad.to_numpy(), 3 * x.to_numpy() ** 2)
    draw()
    with ti.ad.Tape(loss=loss):
        noisy()
    assert np.allclose(x.grad.to_numpy(), noise.to_numpy())
    assert_no_report(capsys)


# ---- silent zeros and misuse ----------------------------------------------------------------------

def test_grad_without_seed_and_kernel_without_gradient_output(cube, mode, capsys):
    """Warnings, not errors: a zero gradient may be the true one (Taichi's own tests call
    .grad() so, below), but it is usually a forgotten seed."""
    x, _, k = cube
    k()
    k.grad()
    assert "every output adjoint zero" in capsys.readouterr().err
    assert not x.grad.to_numpy().any()
    plain = ti.field(ti.f64, shape=4)

    @ti.kernel
    def copy():
        for i in x:
            plain[i] = x[i]

    copy()
    copy.grad()
    assert "writes no field that has a gradient" in capsys.readouterr().err


def test_taichi_grad_of_integer_kernels_and_unseeded_kernels_run(mode, capsys):
    """Taichi 1.7.4's test_mod (integer fields: nothing to differentiate) and
    test_violate_kernel_simplicity1/2 (.grad() with nothing seeded) run, with a warning."""
    x, y = ti.field(ti.i32), ti.field(ti.i32)
    ti.root.dense(ti.i, 1).place(x, y)
    ti.root.lazy_grad()

    @ti.kernel
    def mod():
        y[0] = x[0] % 3

    @ti.kernel
    def mod_atomic():
        ti.atomic_add(y[0], x[0] % 3)

    for kernel in (mod, mod_atomic):
        kernel()
        kernel.grad()
    a, b = ti.field(ti.f32), ti.field(ti.f32)
    ti.root.dense(ti.i, 1).place(a, b)
    ti.root.lazy_grad()

    @ti.kernel
    def simplicity1():
        for i in a:
            b[i] = a[i] * 42
            for j in ti.static(range(3)):
                b[i] += a[i]

    @ti.kernel
    def simplicity2():
        for i in a:
            for j in ti.static(range(3)):
                b[i] += a[i]
            b[i] += a[i] * 42

    for kernel in (simplicity1, simplicity2):
        kernel()
        kernel.grad()
        assert a.grad[0] == 0
    assert capsys.readouterr().err.count("Unseeded gradient (warning)") == 4


def test_an_output_seeded_only_far_into_it_is_seeded(mode):
    """Whether a later launch's outputs are seeded (the order check) looks at the start of a
    large output first, then at all of it."""
    x = ti.field(ti.f64, shape=8192, needs_grad=True)
    y = ti.field(ti.f64, shape=8192, needs_grad=True)
    z = ti.field(ti.f64, shape=(2, 8192), needs_grad=True)

    @ti.kernel
    def stage1():
        for i in x:
            y[i] = 2 * x[i]

    @ti.kernel
    def stage2(t: ti.i32):
        for i in y:
            z[t, i] = y[i] * y[i]

    stage1()
    stage2(1)
    z.grad[1, 5000] = 1.0
    with pytest.raises(ti.SilentZeroRuleError) as info:
        stage1.grad()
    assert info.value.report.rule == "Adjoints out of order"


def _two_stage(x, loss):
    y = ti.field(ti.f64, shape=4, needs_grad=True)

    @ti.kernel
    def stage1():
        for i in x:
            y[i] = ti.sin(x[i])

    @ti.kernel
    def stage2():
        for i in y:
            loss[None] += y[i] * y[i]

    return y, stage1, stage2


def test_adjoints_out_of_order(scalars):
    x, _, loss = scalars
    _, stage1, stage2 = _two_stage(x, loss)
    stage1()
    stage2()
    loss.grad[None] = 1
    with pytest.raises(ti.SilentZeroRuleError) as info:
        stage1.grad()
    assert "stage2.grad() before stage1.grad()" in info.value.report.fix


def test_adjoints_out_of_order_inside_a_tape(scalars):
    """A manual .grad() inside a Tape's block, of a launch a later taped launch read from: the
    Tape's launches await their adjoints too."""
    x, _, loss = scalars
    _, stage1, stage2 = _two_stage(x, loss)
    with pytest.raises(ti.SilentZeroRuleError) as info, ti.ad.Tape(loss=loss):
        stage1()
        stage2()
        loss.grad[None] = 1
        stage1.grad()
    assert "stage2.grad() before stage1.grad()" in info.value.report.fix


def test_adjoints_in_order_are_clean(scalars, capsys):
    x, _, loss = scalars
    _, stage1, stage2 = _two_stage(x, loss)
    stage1()
    stage2()
    loss.grad[None] = 1
    stage2.grad()
    stage1.grad()
    assert_no_report(capsys)
    assert np.allclose(x.grad.to_numpy(), np.sin(2 * x.to_numpy()))


def _checkpointed_steps(steps, n=4):
    """DiffTaichi's checkpointing (diffmpm): a scratch field `tmp`, cleared every step, is
    recomputed in the backward pass instead of stored. Returns (theta, x, run_backward)."""
    x = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
    y = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
    tmp = ti.field(ti.f64, shape=n, needs_grad=True)
    theta = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def clear():
        for i in range(n):
            tmp[i] = 0
            tmp.grad[i] = 0

    @ti.kernel
    def scatter(s: ti.i32):
        for i in range(n):
            tmp[i] += theta[None] * x[s, i] ** 2
            y[s + 1, i] = y[s, i] + x[s, i]

    @ti.kernel
    def advance(s: ti.i32):
        for i in range(n):
            x[s + 1, i] = x[s, i] + 0.1 * tmp[i] + 0.01 * y[s + 1, i]

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += x[steps, i]

    x.from_numpy(np.vstack([np.linspace(0.1, 0.4, n), np.zeros((steps, n))]))
    theta[None] = 0.5

    def forward():
        loss[None] = 0
        for s in range(steps):
            clear()
            scatter(s)
            advance(s)
        total()
        return loss[None]

    def backward(order=reversed):
        loss.grad[None] = 1
        total.grad()
        for s in order(range(steps)):
            clear()
            scatter(s)                  # recompute step s's scratch field
            advance.grad(s)
            scatter.grad(s)

    return theta, forward, backward


def test_checkpointed_recompute_is_clean(mode, capsys):
    theta, forward, backward = _checkpointed_steps(3)
    expected = finite_difference(forward, theta)
    forward()
    backward()
    assert_no_report(capsys)
    assert np.allclose(theta.grad[None], expected, rtol=1e-7)


def test_checkpointed_steps_out_of_order(mode):
    _, forward, backward = _checkpointed_steps(2)
    forward()
    with pytest.raises(ti.SilentZeroRuleError) as info:
        backward(order=list)              # step 0 first: step 1 read what step 0 wrote
    assert info.value.report.rule == "Adjoints out of order"


def test_field_without_gradient_on_the_path(scalars):
    x, _, loss = scalars
    y = ti.field(ti.f64, shape=4)            # forgot needs_grad=True

    @ti.kernel
    def stage1():
        for i in x:
            y[i] = x[i] * 2

    @ti.kernel
    def stage2():
        for i in y:
            loss[None] += y[i]

    with pytest.raises(ti.SilentZeroRuleError) as info:
        with ti.ad.Tape(loss=loss):
            stage1()
            stage2()
    report = info.value.report
    assert report.field == "y" and "needs_grad=True" in report.fix
    assert line_text(report.write) == "y[i] = x[i] * 2"
    assert line_text(report.read) == "loss[None] += y[i]"


def test_value_passed_around_the_tape_as_an_argument(scalars):
    x, _, loss = scalars

    @ti.kernel
    def scale(a: ti.f64):
        for i in x:
            loss[None] += a * x[i]

    with pytest.raises(ti.SilentZeroRuleError) as info:
        with ti.ad.Tape(loss=loss):
            scale(x[3])
    assert info.value.report.element_text == "x[3]"
    assert line_text(info.value.report.read) == "scale(x[3])"


def _custom_square(x, loss, accumulate):
    @ti.kernel
    def square():
        for i in x:
            loss[None] += x[i] * x[i]

    @ti.kernel
    def square_grad_assigning():
        for i in x:
            x.grad[i] = 2 * x[i] * loss.grad[None]

    @ti.kernel
    def square_grad_accumulating():
        for i in x:
            x.grad[i] += 2 * x[i] * loss.grad[None]

    @ti.ad.grad_replaced
    def custom_square():
        square()

    @ti.ad.grad_for(custom_square)
    def custom_square_grad():
        if accumulate:
            square_grad_accumulating()
        else:
            square_grad_assigning()

    return custom_square


def _linear(x, loss):
    @ti.kernel
    def linear():
        for i in x:
            loss[None] += 2 * x[i]
    return linear


def test_custom_gradient_that_assigns(scalars):
    x, _, loss = scalars
    custom_square, linear = _custom_square(x, loss, accumulate=False), _linear(x, loss)
    with pytest.raises(ti.SilentZeroRuleError) as info:
        with ti.ad.Tape(loss=loss):
            custom_square()
            linear()          # its adjoint runs first and fills x.grad, then the custom one
    assert "x.grad[i] += ..." in info.value.report.fix
    assert line_text(info.value.report.write) == "x.grad[i] = 2 * x[i] * loss.grad[None]"


def test_custom_gradient_that_accumulates_is_clean(scalars, capsys):
    x, _, loss = scalars
    custom_square, linear = _custom_square(x, loss, accumulate=True), _linear(x, loss)
    with ti.ad.Tape(loss=loss):
        custom_square()
        linear()
    assert_no_report(capsys)
    assert np.allclose(x.grad.to_numpy(), 2 * x.to_numpy() + 2)


def test_a_warning_about_rounds_does_not_hide_a_gradient_at_two_points(cube, capsys):
    """Found by the planted-bug fuzzer (seed 1691): a kernel reading x through no derivative
    (floor there, stop_grad here; its adjoint adds nothing to x.grad) is swept first in the
    second round. It used to warn "accumulates across rounds" about x.grad and mark it warned
    by a fake clear, so the sweep of the kernel that does add to x.grad skipped the error."""
    x, loss, k = cube

    @ti.kernel
    def stepped():
        for i in x:
            loss[None] += ti.stop_grad(x[i]) ** 2

    def sweep():
        k()
        stepped()
        loss.grad[None] = 1
        stepped.grad()
        k.grad()

    sweep()
    first = x.to_numpy().copy()
    assert x.grad.to_numpy() == pytest.approx(3 * first ** 2)     # stop_grad: no 2x term
    x.from_numpy(first - 0.05 * x.grad.to_numpy())                # x.grad not cleared
    with pytest.raises(ti.StaleGradientRuleError) as info:
        sweep()
    assert info.value.report.kernel == "k"
    assert "accumulates across rounds" not in capsys.readouterr().err


def test_accumulating_rounds_warns_and_clearing_is_clean(cube, capsys):
    x, loss, k = cube
    for _ in range(2):
        k()
        loss.grad[None] = 1
        k.grad()
    assert "Gradient accumulates across rounds" in capsys.readouterr().err
    for _ in range(2):
        ti.ad.clear_all_gradients()
        k()
        loss.grad[None] = 1
        k.grad()
    assert_no_report(capsys)
    assert np.allclose(x.grad.to_numpy(), 3 * x.to_numpy() ** 2)


# ---- non-differentiable operations: a note ------------------------------------------------------

def test_non_differentiable_ops_on_the_path_give_a_note(scalars):
    x, _, loss = scalars

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.floor(x[i]) * x[i]

    with pytest.warns(ti.NonDifferentiableWarning, match="`floor` has no derivative") as notes:
        with ti.ad.Tape(loss=loss):
            k()
    assert notes[0].lineno == k.ir.body[0].body[0].loc.line
    assert np.allclose(x.grad.to_numpy(), np.floor(x.to_numpy()))   # d/dx floor(x) * x, a.e.


def test_a_func_inlined_many_times_gives_one_note_per_line(scalars):
    """A ti.func with a floor, called three times in one kernel, gives one note for its line,
    not three (Differender's raycaster printed the same `floor` note 22 times)."""
    x, _, loss = scalars

    @ti.func
    def frac(v):
        return v - ti.floor(v)

    @ti.kernel
    def k():
        for i in x:
            loss[None] += frac(x[i]) + frac(2 * x[i]) + frac(3 * x[i])

    with (pytest.warns(ti.NonDifferentiableWarning, match="`floor` has no derivative") as notes,
          ti.ad.Tape(loss=loss)):
        k()
    assert len([n for n in notes if "`floor`" in str(n.message)]) == 1
    assert np.allclose(x.grad.to_numpy(), 1 + 2 + 3)     # floor's derivative is 0 a.e.


def test_int_cast_on_the_path_gives_a_note(scalars):
    x, _, loss = scalars

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.cast(x[i] * 4, ti.i32) + x[i]

    with pytest.warns(ti.NonDifferentiableWarning, match="`cast` has no derivative"):
        with ti.ad.Tape(loss=loss):
            k()
    assert x.grad.to_numpy().tolist() == [1.0, 1.0, 1.0, 1.0]


def test_stop_grad_says_the_cut_is_intended(scalars, capsys):
    x, _, loss = scalars

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.stop_grad(ti.floor(x[i])) + x[i]

    with ti.ad.Tape(loss=loss):
        k()      # no note: the module turns NonDifferentiableWarning into an error
    assert_no_report(capsys)


# ---- the Kernel Simplicity Rule: only shapes the transform cannot handle -------------------------

def test_atomic_result_cannot_be_replayed(scalars):
    x, _, loss = scalars
    slot = ti.field(ti.i32, shape=())

    @ti.kernel
    def k():
        for i in x:
            n = ti.atomic_add(slot[None], 1)
            loss[None] += x[i] * n

    with pytest.raises(ti.KernelSimplicityRuleError) as info:
        with ti.ad.Tape(loss=loss):
            k()
    assert info.value.loc.text.strip() == "n = ti.atomic_add(slot[None], 1)"


def test_nested_loops_and_whiles_differentiate(scalars, capsys):
    """Taichi's old rule forbade a loop next to other statements or two inner loops; tinyad's
    transform handles both (and while loops), so there is nothing to report."""
    x, _, loss = scalars

    @ti.kernel
    def k():
        for i in x:
            acc = x[i]
            for j in range(3):
                acc = acc * x[i] + 0.5
            n = 0
            while n < 2:
                acc = ti.sin(acc)
                n += 1
            loss[None] += acc

    def run():
        loss[None] = 0
        k()
        return loss[None]

    with ti.ad.Tape(loss=loss):
        k()
    assert_no_report(capsys)
    assert np.allclose(x.grad.to_numpy(), finite_difference(run, x))


# ---- check modes and reports ------------------------------------------------------------------------

def test_warn_mode_reports_and_goes_on(mode, capsys):
    ti.init(mode=mode, check="warn", default_fp=ti.f64)
    b = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    b[None] = 2.0

    @ti.kernel
    def k():
        loss[None] = b[None] * b[None]
        b[None] += 1

    with ti.ad.Tape(loss=loss):
        k()
    err = capsys.readouterr().err
    assert "Global Data Access Rule 1" in err and "b[None] += 1" in err
    assert b.grad[None] == 6.0   # the wrong gradient Taichi would give, after the warning


def test_off_mode_checks_nothing(mode, capsys):
    ti.init(mode=mode, check="off", default_fp=ti.f64)
    b = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        loss[None] = b[None] * b[None]
        b[None] += 1

    with ti.ad.Tape(loss=loss):
        k()
    assert capsys.readouterr().err == ""


def test_report_to_dict_and_text(scalars):
    x, b, loss = scalars

    @ti.kernel
    def k():
        loss[None] = x[0] * b[None]
        b[None] += 100

    with pytest.raises(ti.AutodiffRuleError) as info:
        with ti.ad.Tape(loss=loss):
            k()
    data = info.value.report.to_dict()
    assert data["rule"] == "Global Data Access Rule 1" and data["field"] == "b"
    assert data["read"]["line"] + 1 == data["write"]["line"]
    assert (data["read"]["value"], data["write"]["value"]) == (3.0, 103.0)
    text = str(info.value)
    assert "read  at test_rules.py" in text and "^" in text and "fix:" in text


def _stepper(steps):
    """x[t + 1] = sin(x[t]) over `steps` launches, a kernel that clobbers x[0], and the loss."""
    x = ti.field(ti.f64, shape=steps + 1, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        x[t + 1] = ti.sin(x[t])

    @ti.kernel
    def clobber():
        x[0] = 5.0

    @ti.kernel
    def total():
        loss[None] = x[steps]

    x[0] = 0.3
    return x, loss, step, clobber, total


@pytest.fixture
def short_history(mode, monkeypatch):
    """The checker remembers 8 launches outside a Tape (launches.HISTORY, 4096 in real
    runs)."""
    from tinyad.check import launches
    monkeypatch.setattr(launches, "HISTORY", 8)
    ti.init(mode=mode, default_fp=ti.f64)
    return mode


def test_a_tape_longer_than_the_history_still_checks_its_first_launch(short_history):
    """Fast mode let go of the copies of a Tape's first launches once 512 more had run: an
    overwrite of what step(0) read, 700 launches into the Tape, went unreported."""
    _, loss, step, clobber, total = _stepper(30)
    with pytest.raises(ti.ReadThenOverwriteRuleError, match=r"x\[0\]"):
        with ti.ad.Tape(loss):
            for t in range(30):
                step(t)
            clobber()
            total()


def test_a_manual_sweep_past_the_history_says_its_replay_is_unchecked(short_history, capsys):
    """A manual kernel.grad() finds its forward launch in the checker's history; one that left
    it (launches.HISTORY outside any Tape) runs unchecked, and says so instead
    of staying quiet as it did."""
    for steps, within in ((4, True), (30, False)):
        _, loss, step, clobber, total = _stepper(steps)
        for t in range(steps):
            step(t)
        total()
        clobber()               # changes what step(0) read
        loss.grad[None] = 1
        total.grad()
        if within:
            with pytest.raises(ti.ReplayDivergenceRuleError, match=r"x\[0\]"):
                for t in reversed(range(steps)):
                    step.grad(t)
            continue
        for t in reversed(range(steps)):
            step.grad(t)
        err = capsys.readouterr().err
        assert re.search(r"step\.grad\(\d+\) belongs to forward launch #\d+", err)
        assert "this adjoint's replay is not checked" in err


def test_a_recomputing_sweep_past_the_history_is_no_new_round(short_history, capsys):
    """A manual sweep that recomputes each step's scratch value before its adjoint (DiffTaichi's
    checkpointing, as benchmarks/mpm.py) stands each recompute for its forward launch. Past the
    history the forward launch was forgotten, the recompute looked like a new round, and every
    step warned "Gradient accumulates across rounds" about a gradient that was right."""
    steps = 12
    x = ti.field(ti.f64, shape=steps + 1, needs_grad=True)
    w = ti.field(ti.f64, shape=(), needs_grad=True)
    scratch = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def clear():
        scratch[None] = 0.0
        scratch.grad[None] = 0.0

    @ti.kernel
    def spread(t: ti.i32):
        scratch[None] = w[None] * x[t]

    @ti.kernel
    def gather(t: ti.i32):
        x[t + 1] = x[t] + ti.sin(scratch[None])

    @ti.kernel
    def total():
        loss[None] = x[steps]

    def forward(w0):
        x0 = 0.3
        for _ in range(steps):
            x0 = x0 + np.sin(w0 * x0)
        return x0

    x[0], w[None] = 0.3, 0.7
    for t in range(steps):
        clear()
        spread(t)
        gather(t)
    total()
    loss.grad[None] = 1
    total.grad()
    for t in reversed(range(steps)):
        clear()
        spread(t)              # recomputed: the scratch value of step t again
        gather.grad(t)
        spread.grad(t)
    err = capsys.readouterr().err
    assert "accumulates across rounds" not in err
    assert "this adjoint's replay is not checked" in err    # (its forward left the history)
    h = 1e-6
    assert w.grad[None] == pytest.approx((forward(0.7 + h) - forward(0.7 - h)) / (2 * h),
                                         rel=1e-6)


def test_a_vector_component_overwritten_is_named_with_its_component(mode):
    """Both modes name the component that changed and its scalar values (fast mode named the
    vector, v[0], with both components' values)."""
    v = ti.Vector.field(2, ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def use():
        for i in range(4):
            loss[None] += v[i].norm()

    @ti.kernel
    def bump():
        for i in range(4):
            v[i][1] = v[i][1] + 1.0

    v.from_numpy(np.ones((4, 2)))
    with pytest.raises(ti.ReadThenOverwriteRuleError) as caught:
        with ti.ad.Tape(loss):
            use()
            bump()
    text = str(caught.value)
    assert "v[0, 1] was read, then changed" in text
    assert "would see v[0, 1] = 2 instead of 1" in text


@pytest.mark.parametrize("n", [8, 30000])
def test_an_iteration_overwriting_its_own_element_after_reading_it(mode, n, capsys):
    """Each parallel iteration reads x[i] for the adjoint, then stores x[i]: fast mode decides
    it from x's values before and after the launch, at any size (it was said to be unchecked
    past 20,000 elements); an overwrite with the same values is no violation."""
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def square_in_place():
        for i in range(n):
            x[i] = x[i] ** 2

    @ti.kernel
    def clamp_in_place():
        for i in range(n):
            x[i] = ti.min(x[i], 10.0)     # the adjoint replays x[i]; the value stays

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += x[i] ** 3

    start = np.linspace(0.5, 1.5, n)
    x.from_numpy(start)
    with pytest.raises(ti.ReadThenOverwriteRuleError) as caught:
        with ti.ad.Tape(loss):
            square_in_place()
            total()
    assert "x[0] = 0.25 instead of 0.5" in str(caught.value)
    x.from_numpy(start)
    with ti.ad.Tape(loss):
        clamp_in_place()
        total()
    assert np.allclose(x.grad.to_numpy(), 3 * start ** 2)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("n", [8, 30000])
def test_a_scatter_through_an_index_field_is_checked_at_any_size(mode, n, capsys):
    """y[idx[i]] = ... in a parallel loop: two iterations storing one element is a conflict
    the IR cannot see. Fast mode computes every iteration's index from idx before the launch,
    which clears a permutation at any size; where two iterations meet, the launch's recorded
    accesses name them (tinyad/check/accessrecord.py)."""
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)
    idx = ti.field(ti.i32, shape=n)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def scatter():
        for i in range(n):
            j = idx[i]
            y[j] = x[i] * 3.0

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += y[i] ** 2

    start = np.linspace(0, 1, n)
    x.from_numpy(start)
    idx.from_numpy((np.arange(n) // 2).astype(np.int32))     # pairs of iterations collide
    with pytest.raises(ti.ParallelConflictRuleError, match=r"both store y\[0\]"):
        with ti.ad.Tape(loss):
            scatter()
            total()
    permutation = np.random.default_rng(1).permutation(n).astype(np.int32)
    idx.from_numpy(permutation)
    y.fill(0)
    with ti.ad.Tape(loss):
        scatter()
        total()
    assert np.allclose(x.grad.to_numpy(), 18 * start)     # d/dx (3x)^2
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("n", [8, 30000])
def test_a_shift_in_place_is_a_conflict_at_any_size(mode, n):
    """x[i] = x[i + 1] * 2 in a parallel loop: iteration i + 1 stores what iteration i reads.
    Fast mode finds it from the indices alone past 20,000 elements too."""
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def shift():
        for i in range(n - 1):
            x[i] = x[i + 1] * 2.0

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += x[i] ** 2

    x.from_numpy(np.linspace(0, 1, n))
    with pytest.raises(ti.ParallelConflictRuleError,
                       match=r"iteration 1 of a parallel loop writes x\[1\], which iteration 0"):
        with ti.ad.Tape(loss):
            shift()
            total()


def test_a_loop_breaking_a_rule_every_iteration_keeps_a_few_reports(mode):
    """Outside a Tape a violation waits for the launch's adjoint. A serial loop that reads x[0]
    and then adds to it breaks Rule 1 at every iteration: the launch kept one report per
    iteration (a runaway `while` grew by 45 MB a second, and Ctrl-C then took minutes). It
    keeps the first few, and the adjoint raises the first."""
    x = ti.field(ti.f64, shape=2, needs_grad=True)

    @ti.kernel
    def accumulate():
        while x[0] < 3000.0:          # a condition read, then an add to what it read
            x[0] += 1.0
            x[1] = x[0] * 0.5

    accumulate()
    from tinyad.runtime import runtime   # noqa: PLC0415
    launch = runtime.backend.checker.history[-1]
    assert 1 <= len(launch.problems) <= 16
    with pytest.raises(ti.AutodiffRuleError, match=r"x\[0\]"):
        accumulate.grad()


def test_a_field_without_gradient_read_through_stop_grad_is_no_missing_gradient(mode, capsys):
    """Taichi's fem99 example reads a face's area, computed from the positions in a field
    without a gradient: tinyad stops it (the gradient through the area is silently lost). Read
    through ti.stop_grad, the cut is the user's choice, and nothing is reported: on one read,
    or as Taichi spells it, ti.stop_grad(y) on the field (the only form Taichi 1.7 takes, so
    the report's fix names it: biaxialFem99.py's user following `ti.stop_grad(V[...])` got
    Taichi's AttributeError)."""
    w = ti.field(ti.f64, shape=4, needs_grad=True)
    y = ti.field(ti.f64, shape=4)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def stopped():
        for i in w:
            y[i] = w[i] * 2
        for i in w:
            loss[None] += ti.stop_grad(y[i]) * w[i]

    @ti.kernel
    def stopped_as_taichi():
        for i in w:
            y[i] = w[i] * 2
        for i in w:
            ti.stop_grad(y)
            loss[None] += y[i] * w[i]

    @ti.kernel
    def plain():
        for i in w:
            y[i] = w[i] * 2
        for i in w:
            loss[None] += y[i] * w[i]

    w.from_numpy(np.arange(1.0, 5.0))
    for kernel in (stopped, stopped_as_taichi):
        with ti.ad.Tape(loss):
            kernel()
        assert_no_report(capsys)
        assert w.grad.to_numpy() == pytest.approx(2 * np.arange(1.0, 5.0))  # d(stop(2w) w)/dw
    with pytest.raises(ti.SilentZeroRuleError, match=r"call ti\.stop_grad\(y\) in the kernel"):
        with ti.ad.Tape(loss):
            plain()
