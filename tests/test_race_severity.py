"""A parallel-loop conflict is an error only where a gradient can depend on it
(tinyad/check/races.py): its values, or values computed from them in any later kernel, reach a
field with a gradient or a load an adjoint replays. A race elsewhere (an integer counter or
statistic) is a warning naming both lines, and the gradient is the true one. Issue 38: a
volume raycaster's `max_valid_sample_step_count` statistic stopped a correct gradient."""
import inspect
import re

import numpy as np
import pytest
from gradcheck import finite_difference

import tinyad as ti

N = 6


def warnings_shown(err: str) -> list:
    """The parallel-conflict warnings in stderr, each as the source lines its two accesses are
    at, in order."""
    shown = []
    for block in err.split("Parallel loop conflict (warning)")[1:]:
        block = block.split("fix:")[0]
        shown.append([int(n) for n in re.findall(r"test_race_severity\.py:(\d+)", block)])
    return shown


def line_of(fn, text: str) -> int:
    """The line number of the source line of `fn` that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


@pytest.fixture
def fields(mode):
    x = ti.field(ti.f64, shape=N, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    count = ti.field(ti.i32, shape=())
    x.from_numpy(np.linspace(0.1, 0.6, N))
    return x, loss, count


def test_a_race_on_a_counter_no_gradient_uses_is_a_warning_and_the_gradient_is_right(
        mode, fields, capsys):
    """Every iteration reads the counter and stores a new maximum (a real race), beside a loss
    from x that does not depend on it: a warning naming both lines, the true gradient."""
    x, loss, count = fields

    @ti.kernel
    def compute():
        for k in range(N):
            seen = count[None]
            count[None] = ti.max(seen, k)
            loss[None] += x[k] ** 3

    def run():
        loss[None] = 0
        compute()
        return loss[None]

    with ti.ad.Tape(loss=loss):
        compute()
    expected = finite_difference(run, x)
    np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-8)
    np.testing.assert_allclose(expected, 3 * x.to_numpy() ** 2, rtol=1e-8)
    shown = warnings_shown(capsys.readouterr().err)
    assert len(shown) == 1, shown       # once, for every launch of it
    read, write = line_of(compute, "seen = count"), line_of(compute, "count[None] = ti.max")
    assert shown[0] == [read, write]     # in both modes: the read and the store

    @ti.kernel
    def scaled():       # its twin: the adjoint replays the value the iteration read
        for k in range(N):
            seen = count[None]
            count[None] = ti.max(seen, k)
            loss[None] += x[k] * ti.cast(seen, ti.f64)

    with pytest.raises(ti.ParallelConflictRuleError) as info, ti.ad.Tape(loss=loss):
        scaled()
    assert info.value.report.element_text == "count[]"


def test_the_same_race_is_an_error_where_the_loss_depends_on_the_counter(fields, capsys):
    x, loss, count = fields

    @ti.kernel
    def race():
        for k in range(N):
            seen = count[None]
            count[None] = ti.max(seen, k)

    @ti.kernel
    def total():
        for k in range(N):
            loss[None] += x[k] ** 3

    @ti.kernel
    def pick():
        loss[None] += x[count[None]] ** 3     # the counter steers a differentiable read

    @ti.kernel
    def add_count():
        loss[None] += ti.cast(count[None], ti.f64)    # the loss holds it (no read replayed)

    with ti.ad.Tape(loss=loss):           # the counter stays off the gradient: a warning
        race()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 3 * x.to_numpy() ** 2, rtol=1e-12)
    assert len(warnings_shown(capsys.readouterr().err)) == 1
    with pytest.raises(ti.ParallelConflictRuleError) as info, ti.ad.Tape(loss=loss):
        race()
        pick()
    report = info.value.report
    assert report.element_text == "count[]"
    assert report.write.loc.line == line_of(race, "count[None] = ti.max")
    assert "pick reads them from count in a read its adjoint replays" in report.consequence
    with pytest.raises(ti.ParallelConflictRuleError) as info, ti.ad.Tape(loss=loss):
        race()
        total()
        add_count()
    assert "add_count stores them into loss, which has a gradient" in \
        info.value.report.consequence


def test_a_race_before_the_tape_carried_into_an_index_in_it_is_an_error(fields, capsys):
    """The race runs before the Tape, a second kernel there turns the counter into an index,
    and the Tape's kernel reads x through it: an error in the Tape. Set again from Python, the
    counter holds no raced value: the same Tape is clean."""
    x, loss, count = fields
    index = ti.field(ti.i32, shape=())

    @ti.kernel
    def race():
        for k in range(N):
            count[None] = ti.max(count[None], k)

    @ti.kernel
    def to_index():
        index[None] = count[None] - 1

    @ti.kernel
    def pick():
        loss[None] = x[index[None]] ** 2

    race()
    to_index()
    assert len(warnings_shown(capsys.readouterr().err)) == 1     # no gradient taken yet
    with pytest.raises(ti.ParallelConflictRuleError) as info, ti.ad.Tape(loss=loss):
        pick()
    assert info.value.report.element_text == "count[]"
    assert "pick reads them from index" in info.value.report.consequence
    count[None] = N - 1
    to_index()
    with ti.ad.Tape(loss=loss):
        pick()
    expected = np.zeros(N)
    expected[N - 2] = 2 * x[N - 2]
    np.testing.assert_allclose(x.grad.to_numpy(), expected, rtol=1e-12)


def test_a_statistic_in_a_kernel_differentiated_by_hand_is_a_warning(mode, capsys):
    """The raycaster's pattern: get_final_image adds each pixel's colour to the output and
    keeps the largest sample count in a 0-D integer field (`if v > m: m = v`, a race), then
    the sweep calls its .grad() by hand."""
    n = 5
    tape = ti.field(ti.f64, shape=n, needs_grad=True)
    output = ti.field(ti.f64, shape=n, needs_grad=True)
    steps = ti.field(ti.i32, shape=n)
    most = ti.field(ti.i32, shape=())
    tape.from_numpy(np.linspace(0.5, 1.5, n))
    steps.from_numpy(np.array([3, 1, 4, 1, 5], np.int32))

    @ti.kernel
    def get_final_image():
        for i in range(n):
            output[i] += tape[i] * tape[i]
            if steps[i] - 1 > most[None]:       # noqa: PLR1730  (the program's own form)
                most[None] = steps[i] - 1

    get_final_image()
    output.grad.fill(1.0)
    get_final_image.grad()
    np.testing.assert_allclose(tape.grad.to_numpy(), 2 * tape.to_numpy(), rtol=1e-12)
    shown = warnings_shown(capsys.readouterr().err)
    assert len(shown) == 1 and len(shown[0]) == 2
    assert line_of(get_final_image, "most[None] = steps") in shown[0]
