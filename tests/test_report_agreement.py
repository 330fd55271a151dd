"""One bug, one report, the same in both modes (issue 34, item 4): what `tinyad check` counts
(warn mode's violations and their elements) and what the raised error says. The planted-bug
fuzzer (tests/fuzz/plant.py, run by test_fuzz.py) checks the same on random programs."""
import numpy as np
import pytest
from conftest import MODES

import tinyad as ti
from tinyad.runtime import runtime


def violations() -> dict:
    """What warn mode collected: rule and kernel -> (elements, the first report)."""
    return {(p.report.rule, p.report.kernel): (sorted(p.elements), p.report)
            for p in runtime.backend.checks.problems()}


def line_text(access) -> str:
    return access.loc.text.strip()


def _energy_program(mode, check):
    """The newcomer's Rule 1 program: compute_energy reads x at two places of one line,
    advance overwrites x inside the Tape."""
    ti.init(mode=mode, check=check)
    n = 8
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    v = ti.field(ti.f32, shape=n)
    energy = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def compute_energy():
        for i in range(n - 1):
            d = x[i + 1] - x[i]
            energy[None] += 0.5 * d * d * x[i]

    @ti.kernel
    def advance(dt: ti.f32):
        for i in x:
            x[i] += dt * v[i]

    x.from_numpy(np.arange(n, dtype=np.float32) * 0.1)
    v.fill(1.0)
    with ti.ad.Tape(loss=energy):
        compute_energy()
        advance(0.1)
        compute_energy()


def test_one_overwrite_of_elements_read_at_two_places_is_one_violation(mode, capsys):
    """It was two ("x[0]" read at `x[i]`, the rest first read at `x[i + 1]`), and fast mode
    counted one element of each where interp mode counted 1 and 7."""
    _energy_program(mode, "warn")
    found = violations()
    assert list(found) == [("Global Data Access Rule 1", "advance")], found
    elements, report = found["Global Data Access Rule 1", "advance"]
    assert elements == [f"x[{i}]" for i in range(8)]
    assert line_text(report.read) == "d = x[i + 1] - x[i]"
    assert line_text(report.write) == "x[i] += dt * v[i]"
    assert capsys.readouterr().err.count("Global Data Access Rule 1:") == 1


BOTH = pytest.mark.skipif(MODES != ["interp", "fast"], reason="needs both modes")


@BOTH
def test_the_same_program_raises_the_same_report_in_both_modes():
    reports = {}
    for mode in ("interp", "fast"):
        with pytest.raises(ti.ReadThenOverwriteRuleError) as info:
            _energy_program(mode, "error")
        reports[mode] = info.value.report.to_dict()
    assert reports["interp"] == reports["fast"]      # iterations included
    assert reports["fast"]["read"]["iteration"] is not None


def test_a_shift_in_place_counts_every_element_and_names_iterations_by_their_index(mode):
    """Fast mode's index-only proof counted one element and numbered iterations from the loop's
    start (iteration 0 writes x[1]) where interp mode names them by i (iteration 1)."""
    ti.init(mode=mode, check="warn")
    x = ti.field(ti.f32, shape=8, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def shift():
        for i in range(1, 8):
            x[i] = x[i - 1] * 2.0

    @ti.kernel
    def total():
        for i in range(8):
            loss[None] += x[i]

    x.from_numpy(np.arange(8, dtype=np.float32))
    with ti.ad.Tape(loss):
        shift()
        total()
    elements, report = violations()["Parallel loop conflict", "shift"]
    assert elements == [f"x[{i}]" for i in range(1, 7)]
    assert report.element_text == "x[1]"
    assert (report.write.iteration, report.read.iteration) == (1, 2)
    # the values two iterations saw depend on the order they ran in: none is named
    assert report.read.value is None and report.write.value is None


def test_an_iteration_overwriting_what_it_and_its_neighbour_read(mode):
    """One kernel reads x[i] and x[i - 1], then stores x[i]: Rule 1 on x[1..7] and a parallel
    conflict on x[1..6]. Fast mode's interpreter check of the launch stopped at its first
    report: one violation of one element."""
    ti.init(mode=mode, check="warn")
    x = ti.field(ti.f32, shape=8, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in range(1, 8):
            loss[None] += x[i] * x[i - 1]
            x[i] = 0.0

    x.from_numpy(np.arange(8, dtype=np.float32) + 1)
    with ti.ad.Tape(loss):
        k()
    found = {key: elements for key, (elements, _) in violations().items()}
    assert found == {("Global Data Access Rule 1", "k"): [f"x[{i}]" for i in range(1, 8)],
                     ("Parallel loop conflict", "k"): [f"x[{i}]" for i in range(1, 7)]}


def test_an_overwrite_names_the_first_launch_that_read_the_element(mode):
    """Two kernels read x, a third overwrites it: the report names the element's earlier
    read, in both modes (fast mode named whichever read its index listed first: here
    `second`'s, whose box starts at x[0])."""
    ti.init(mode=mode)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def first():
        for i in range(1, 3):
            loss[None] += ti.sin(x[i])

    @ti.kernel
    def second():
        for i in range(4):
            loss[None] += x[i] * x[i]

    @ti.kernel
    def bump():
        for i in range(1, 4):
            x[i] += 1.0

    x.from_numpy(np.array([0.1, 0.2, 0.3, 0.4]))
    with pytest.raises(ti.ReadThenOverwriteRuleError) as info, ti.ad.Tape(loss):
        first()
        second()
        bump()
    report = info.value.report
    assert report.element_text == "x[1]" and report.read.kernel == "first"
    assert line_text(report.read) == "loss[None] += ti.sin(x[i])"


def _shifted_read_then_bumped(mode):
    """k reads w[(i + 1) % 4] (the factor of x's gradient); a kernel outside any Tape bumps w
    between the forward and k.grad(): a replay divergence on every element of w."""
    ti.init(mode=mode)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    w = ti.field(ti.f64, shape=4)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in range(4):
            loss[None] += w[(i + 1) % 4] * x[i]

    @ti.kernel
    def bump():
        for i in range(4):
            w[i] += 0.5

    x.from_numpy(np.array([0.1, 0.2, 0.3, 0.4]))
    w.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    k()
    bump()
    loss.grad[None] = 1
    with pytest.raises(ti.ReplayDivergenceRuleError) as info:
        k.grad()
    return info.value.report


@BOTH
def test_a_replay_divergence_names_the_element_the_first_iteration_read():
    """Fast mode named the box's least changed element (w[0]), interp mode the first its
    adjoint replayed (w[1]). Both name the element the forward read first in a serial run
    (iteration 0 read w[1]); fast mode finds that by running the launch again, recorded
    (tinyad/check/readevidence.py). Fuzzer finding tests/fuzz/findings/plant-outside-seed32.py"""
    interp, fast = (_shifted_read_then_bumped(mode) for mode in ("interp", "fast"))
    assert interp.element_text == "w[1]" and interp.read.iteration == 0
    assert fast.to_dict() == interp.to_dict()


def test_a_replay_divergence_names_the_launch_being_differentiated(mode):
    """k(0) and k(1) read equal values of x, so fast mode kept one copy for both, and named
    launch #1 when the adjoint of launch #2 found x changed (fuzzer, plant 'outside' seed
    131)."""
    ti.init(mode=mode)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k(t: ti.i32):
        for i in range(4):
            loss[None] += x[i] * x[i] * (t + 1)

    @ti.kernel
    def bump():
        for i in range(4):
            x[i] += 0.5

    x.from_numpy(np.array([0.1, 0.2, 0.3, 0.4]))
    k(0)
    k(1)
    bump()
    loss.grad[None] = 1
    with pytest.raises(ti.ReplayDivergenceRuleError) as info:
        k.grad(1)
    report = info.value.report
    assert (report.read.kernel, report.read.launch) == ("k", 2)
    assert report.element_text == "x[0]" and report.write.kernel == "bump"


@pytest.mark.parametrize("reader", ["gather", "branch"])
@pytest.mark.parametrize("writer", ["python", "kernel"])
def test_a_write_to_an_element_no_read_reached_is_clean(mode, reader, writer, capsys):
    """k reads w only where no iteration goes: through idx = [0, 0, 1, 1] (a gather), or in a
    branch never taken; w[2] is then changed inside the Tape. Nothing the adjoint replays
    changed: interp mode is silent and the gradient right. Fast mode copies each read's whole
    box and reports Rule 1 on w[2], a read that never happened (found through the fuzzer's
    findings tests/fuzz/findings/plant-python-seed159.py and plant-outside-seed158.py, where
    fast mode named such a read). Fast mode now asks, before it reports, which elements the
    launch read (tinyad/check/readevidence.py)."""
    ti.init(mode=mode)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    w = ti.field(ti.f64, shape=4)
    idx = ti.field(ti.i32, shape=4)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def gather():
        for i in range(4):
            loss[None] += w[idx[i]] * x[i]

    @ti.kernel
    def branch():
        for i in range(4):
            loss[None] += x[i]
            if x[i] > 10.0:
                loss[None] += w[i] * x[i]

    @ti.kernel
    def bump():
        w[2] = 7.0

    x.from_numpy(np.array([0.1, 0.2, 0.3, 0.4]))
    w.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    idx.from_numpy(np.array([0, 0, 1, 1], dtype=np.int32))
    with ti.ad.Tape(loss):
        (gather if reader == "gather" else branch)()
        if writer == "python":
            w[2] = 7.0
        else:
            bump()
    expected = [1.0, 1.0, 2.0, 2.0] if reader == "gather" else [1.0] * 4   # w[idx[i]], 1
    assert x.grad.to_numpy().tolist() == expected
    assert "Rule" not in capsys.readouterr().err



def _read_then_bumped(mode, check="error"):
    """`pick` reads w[i + 1] only where a ti.select chooses it (even i: w[1], w[3], w[5]),
    `stencil` reads w at two places of its iteration; `bump` then changes w[2] inside the
    Tape."""
    ti.init(mode=mode, check=check)
    x = ti.field(ti.f64, shape=6, needs_grad=True)
    w = ti.field(ti.f64, shape=6)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def pick():
        for i in range(5):
            loss[None] += ti.select(i % 2 == 0, w[i + 1], 1.0) * x[i]

    @ti.kernel
    def stencil():
        for i in range(1, 5):
            left = w[i - 1]
            right = w[i + 1]
            loss[None] += left * right * x[i]

    @ti.kernel
    def bump():
        for i in range(2, 4):
            w[i] += 1.0

    x.from_numpy(np.linspace(0.1, 0.6, 6))
    w.from_numpy(np.linspace(1.0, 2.0, 6))
    with ti.ad.Tape(loss):
        pick()
        stencil()
        bump()
    return x, w, x.grad, loss


def test_an_overwrite_names_the_read_that_came_first_in_a_serial_run(mode):
    """w[2] is in the box `pick` may read, but its select never took w[2]: fast mode named
    that read (its copy is the box). `stencil` read w[2] at iteration 3 (w[i - 1], its first
    statement) and at iteration 1 (w[i + 1]): interp mode, whose lanes run one statement over
    all iterations before the next, named iteration 3's. The first read in a serial run is
    iteration 1's: both modes name it, and fast mode finds it by running the launch again,
    recorded (tinyad/check/readevidence.py)."""
    with pytest.raises(ti.ReadThenOverwriteRuleError) as info:
        _read_then_bumped(mode)
    report = info.value.report
    assert report.element_text == "w[2]"
    assert (report.read.kernel, report.read.iteration) == ("stencil", 1)
    assert line_text(report.read) == "right = w[i + 1]"


def test_warn_mode_counts_the_elements_reads_reached_and_leaves_the_values_alone(mode):
    """w[2] and w[3] were read (w[3] first by pick, iteration 2): one violation of both. The
    run again that tells fast mode which elements a launch read puts back every field it
    touched: the program computes what it computes unchecked."""
    checked = _read_then_bumped(mode, "warn")
    found = violations()
    assert list(found) == [("Global Data Access Rule 1", "bump")]
    elements, report = found["Global Data Access Rule 1", "bump"]
    assert elements == ["w[2]", "w[3]"] and report.element_text == "w[2]"
    checked = [f.to_numpy() for f in checked]
    unchecked = [f.to_numpy() for f in _read_then_bumped(mode, "off")]
    assert all(np.array_equal(a, b) for a, b in zip(checked, unchecked))
    assert checked[2].any()     # (x's gradient)


def test_an_overwrite_names_the_element_the_writer_changed_first(mode):
    """`backwards` writes x[5] at iteration 0: interp mode meets that change first; fast mode,
    which compares after the launch, named the least element changed (x[0], iteration 5)."""
    ti.init(mode=mode)
    x = ti.field(ti.f64, shape=6, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def use():
        for i in range(6):
            loss[None] += ti.sin(x[i])

    @ti.kernel
    def backwards():
        for i in range(6):
            x[5 - i] += 1.0

    x.from_numpy(np.linspace(0.1, 0.6, 6))
    with pytest.raises(ti.ReadThenOverwriteRuleError) as info, ti.ad.Tape(loss):
        use()
        backwards()
    report = info.value.report
    assert report.element_text == "x[5]"
    assert (report.read.iteration, report.write.iteration) == (5, 0)


def _weights_read_then_bumped(mode, n: int, make_kernel, bumped: int):
    """In one Tape, the kernel `make_kernel(x, w, loss)` returns (x of n elements, w of 5),
    then a kernel storing into w[bumped]: -> the Rule 1 report."""
    ti.init(mode=mode, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    w = ti.field(ti.f64, shape=5)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    kernel = make_kernel(x, w, loss)

    @ti.kernel
    def bump():
        w[bumped] = 5.0

    x.from_numpy(np.linspace(0.1, 0.1 * n, n))
    w.from_numpy(np.linspace(1.0, 2.0, 5))
    with pytest.raises(ti.ReadThenOverwriteRuleError) as info, ti.ad.Tape(loss):
        kernel()
        bump()
    return info.value.report


def test_a_read_in_an_inner_loop_is_first_by_the_pass_it_ran_in(mode):
    """Iteration 0 reads w[0] at its second statement in the inner loop's first pass, and at
    its first statement in the second pass: the second statement's read came first. Fast
    mode's recording kept an inner loop's accesses site by site, and named the first
    statement's."""
    def make(x, w, loss):
        @ti.kernel
        def passes():
            for i in range(4):
                s = ti.cast(0.0, ti.f64)
                for j in range(2):
                    s += w[i + 1 - j] * x[i]
                    s += w[i + j] * x[i] * 2.0
                loss[None] += s
        return passes

    read = _weights_read_then_bumped(mode, 4, make, 0).read
    assert line_text(read) == "s += w[i + j] * x[i] * 2.0" and read.iteration == 0


def test_a_branchs_condition_reads_before_its_body(mode):
    """Iteration 2 reads w[3] in the If's condition, then in its body: the condition's read
    came first. Fast mode's recording ordered an iteration's columns by the path to each
    access, and a path into the body (If, block, statement) sorted before the condition's
    (If, then the access's number): it named the body's line. Found by the planted-bug
    fuzzer (seed 20144, --small)."""
    def make(x, w, loss):
        @ti.kernel
        def branch():
            for i in range(1, 4):
                a = w[i - 1] * x[i]
                if w[i + 1] > 0.0:
                    a += w[i + 1] * x[i]
                loss[None] += a
        return branch

    report = _weights_read_then_bumped(mode, 5, make, 3)
    assert (report.element_text, report.read.iteration) == ("w[3]", 2)
    assert line_text(report.read) == "if w[i + 1] > 0.0:"


def _stored_then_read_and_stored(mode):
    ti.init(mode=mode)
    y = ti.field(ti.f64, shape=4, needs_grad=True)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def first():
        for i in range(4):
            x[i] = ti.sin(y[i])

    @ti.kernel
    def then():
        for i in range(4):
            loss[None] += x[i] * x[i]
            x[i] = 0.5

    y.from_numpy(np.linspace(0.1, 0.4, 4))
    with pytest.raises(ti.SecondWriteRuleError) as info, ti.ad.Tape(loss):
        first()
        then()
    return info.value.report


def test_a_store_read_and_stored_again_by_the_next_launch_is_rule_2(mode):
    """`then` reads x[i] and stores it within its own iteration, after `first` stored it: Rule
    2, as interp mode's log of the Tape has it. Fast mode judged the launch alone (its own
    elements compared before and after it) and said Rule 1."""
    report = _stored_then_read_and_stored(mode)
    assert report.element_text == "x[0]" and report.earlier[0].kernel == "first"
    assert (report.read.kernel, report.write.kernel) == ("then", "then")


@BOTH
def test_a_store_read_and_stored_again_is_reported_alike():
    interp, fast = (_stored_then_read_and_stored(mode).to_dict() for mode in ("interp", "fast"))
    assert interp == fast
