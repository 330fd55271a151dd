"""Differential fuzzing, short profile (the long one: `python -m tests.fuzz --n 10000`), and the
regression tests for what the fuzzer found (plain tests, in both modes).

Each generated program runs in interp mode, or in interp and fast mode, is differentiated, and
must agree across modes and with f64 finite differences with no rule report (tests/fuzz/harness.py
says how close is close enough and why). Fast mode compiles every kernel with numba (seconds
per program), so it gets a few small programs and interp mode a few dozen.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import MODES
from fuzz import gen, harness, plant, plantcheck
from gradcheck import finite_difference
from hypothesis import HealthCheck, given, settings

import tinyad as ti
from tinyad.core.ops import TABLE

# Deterministic in CI: the same examples every run, and no example database on disk.
PROFILE = {"derandomize": True, "database": None, "deadline": None, "print_blob": True,
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


def assert_clean(program, outcome):
    assert outcome.kind == "agreed", f"{outcome.kind}: {outcome.reason}\n{program.source}"


@pytest.mark.skipif("interp" not in MODES, reason="TINYAD_TEST_MODES leaves out interp mode")
# 30 programs in the full profile (CI), 8 in the README's quicker one
@settings(max_examples=30 if os.environ.get("TINYAD_TEST_PROFILE") == "full" else 8, **PROFILE)
@given(gen.programs())
def test_fuzz_interp_against_finite_differences(program):
    assert_clean(program, harness.check(program, modes=("interp",)))


@pytest.mark.skipif(MODES != ["interp", "fast"], reason="needs both modes")
@settings(max_examples=3, **PROFILE)
@given(gen.programs(small=True))
def test_fuzz_interp_and_fast_mode_agree(program):
    assert_clean(program, harness.check(program, modes=("interp", "fast")))


# ---- planted bugs: one rule broken per program, caught alike in both modes -------------------
# (the long profile: `python -m tests.fuzz --plant --n 2000`)
FULL = os.environ.get("TINYAD_TEST_PROFILE") == "full"


@pytest.mark.skipif("interp" not in MODES, reason="TINYAD_TEST_MODES leaves out interp mode")
@pytest.mark.parametrize("rule", sorted(plant.PLANTS))
def test_interp_mode_catches_each_planted_bug(rule):
    for seed in range(6 if FULL else 2):
        planted, outcome = plantcheck.check_seeded(seed, rule, small=True, modes=("interp",))
        assert outcome.kind == "caught", f"{outcome.kind}: {outcome.reason}\n" \
            f"{planted.plant.what}\n{planted.program.source}"


# Both modes: fast mode compiles each program (5-10 s of CPU). A few in the default profile,
# 36 (four of each rule) in the full one; the long run is `python -m tests.fuzz --plant
# --small --count 2000 --results FILE`.
BOTH_MODES_SHORT = [(3, "overwrite"), (5, "outside"), (7, "python")] + \
    ([(4, "race")] if FULL else [])


@pytest.mark.skipif(MODES != ["interp", "fast"], reason="needs both modes")
@pytest.mark.parametrize(("seed", "rule"), BOTH_MODES_SHORT)
def test_both_modes_report_a_planted_bug_alike(seed, rule):
    planted, outcome = plantcheck.check_seeded(seed, rule, small=True)
    assert outcome.kind == "caught", f"{outcome.kind}: {outcome.reason}\n" \
        f"{planted.plant.what}\n{planted.program.source}"


@pytest.mark.skipif(MODES != ["interp", "fast"], reason="needs both modes")
@pytest.mark.parametrize("rule", sorted(plant.PLANTS))
def test_both_modes_report_each_planted_bug_alike(rule):
    """(Full profile only: tests/conftest.py.)"""
    for seed in range(10, 14):
        planted, outcome = plantcheck.check_seeded(seed, rule, small=True)
        assert outcome.kind == "caught", f"seed {seed}: {outcome.kind}: {outcome.reason}\n" \
            f"{planted.plant.what}\n{planted.program.source}"


@pytest.mark.skipif(MODES != ["interp", "fast"], reason="needs both modes")
@pytest.mark.parametrize(("seed", "rule"), [(158, "outside"), (5009, "overwrite"),
                                            (5006, "python"), (5014, "outside"),
                                            (20144, "overwrite")])
def test_findings_of_the_planted_fuzzer_are_reported_alike(seed, rule):
    """Fast mode named a read its copies held but no iteration made: in a branch never taken
    (158: k5's, so it raised at k5's adjoint, launch #3, interp mode at k8's, launch #1), on
    the side of a ti.select not chosen (5009), through a gather that did not reach the
    element (5006); and a replay divergence at the least changed element, where interp mode
    named the first its adjoint met (5014); a read in a branch's body named before the one in
    its condition (20144). (Full profile only: tests/conftest.py.)"""
    planted, outcome = plantcheck.check_seeded(seed, rule, small=True)
    assert outcome.kind == "caught", outcome.reason


def test_a_plant_changes_the_program_and_the_judge_can_fail():
    """The plant adds to the clean program and nothing else moves; judged as if its bug were
    planted, the clean program is a missed plant."""
    planted = plant.planted(5, "overwrite", small=True)
    assert planted.clean.source == gen.generate_seeded(5, small=True).source
    assert planted.program.source != planted.clean.source
    unplanted = plant.Planted(planted.clean, planted.clean, planted.plant)
    assert plantcheck.check(unplanted, modes=("interp",), seed=5).kind == "missed"


def test_the_judge_names_where_two_reports_differ():
    a = {"rule": "R", "read": {"line": 3, "iteration": 2}, "earlier": [{"iteration": 1}]}
    b = {"rule": "R", "read": {"line": 3, "iteration": None}, "earlier": [{"iteration": 1}]}
    assert plantcheck.differences(a, b) == ["read.iteration"]
    assert plantcheck.differences(a, a) == []
    p = plant.Plant("overwrite", "ReadThenOverwriteRuleError", False, "")
    assert plantcheck._disagreed(p, "", ("read.iteration",), [(a, b)]).kind == \
        "caught-no-iteration"
    c = {**b, "read": {"line": 3, "iteration": 5}}      # another iteration named: disagrees
    assert plantcheck._disagreed(p, "", ("read.iteration",), [(a, c)]).kind == "disagreed"


def test_the_plant_tally_counts_by_rule_and_fails_on_a_disagreement(capsys):
    from fuzz.__main__ import PlantTally  # noqa: PLC0415  (the CLI module, run as __main__)
    tally = PlantTally()
    tally.add(plantcheck.PlantOutcome("caught", "race"), 7)
    tally.add(plantcheck.PlantOutcome("caught-no-iteration", "python", "", ("read.iteration",)),
              8)
    assert tally.clean()
    tally.add(plantcheck.PlantOutcome("disagreed", "race", "", ("element",)), 9)
    assert not tally.clean()
    tally.show(1.0)
    out = capsys.readouterr().out
    assert "3 planted programs" in out and "race: where reports differ: element 1" in out
    assert "disagreed: 9 (race)" in out and "iteration-only: 8 (python)" in out


def test_a_planted_run_in_chunks_skips_what_its_results_file_holds(tmp_path, capsys):
    """`--results FILE`: the programs FILE holds are not run again, and the table counts them
    (here all of them: nothing is run, no worker started)."""
    import json

    from fuzz.__main__ import main
    results = tmp_path / "plants.jsonl"
    rules = list(plant.PLANTS)      # (the order jobs take them in)
    lines = [{"seed": 3, "rule": rules[0], "kind": "caught", "reason": "", "keys": [],
              "small": True},
             {"seed": 4, "rule": rules[1], "kind": "missed", "reason": "fast: nothing",
              "keys": [], "small": True}]
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["--plant", "--small", "--count", "2", "--seed", "3", "--results", str(results)]
    assert main(argv) == 1          # a missed plant fails the run
    out = capsys.readouterr().out
    assert "2 programs in" in out and "0 to run" in out
    assert f"missed: 4 ({rules[1]})" in out
    assert main([*argv, "--summary"]) == 1
    assert "2 planted programs" in capsys.readouterr().out


def test_generator_spells_every_differentiable_op():
    differentiable = {name for name, spec in TABLE.items() if spec.differentiable}
    assert differentiable <= set(gen.OPS), differentiable - set(gen.OPS)
    seen = set().union(*(gen.generate_seeded(seed).features for seed in range(300)))
    missing = {f"op:{name}" for name in gen.OPS} - seen
    assert not missing, missing
    for construct in ("if", "ifexp", "loop:for", "loop:while", "break", "func-call",
                      "kernel:time", "kernel:stencil", "kernel:vector", "kernel:matrix",
                      "store:scatter", "store:atomic_max", "store:atomic_min", "index:gather",
                      "dead-output", "manual", "tape", "sweep-reordered", "launched-twice",
                      "two-rounds"):
        assert construct in seen, construct


def test_harness_catches_a_wrong_gradient():
    """The comparison can fail: a program whose gradient is cut by stop_grad, judged as if
    its FD check applied, disagrees with finite differences."""
    program = gen.Program(_one_kernel("loss[None] += ti.stop_grad(x[i]) * x[i]"), set())
    module = harness.load(program.source)
    runs = {("interp", "f64"): harness.run(module, "interp", fd=True)}
    assert harness.judge(runs, ("interp",)).kind == "disagreed"


def test_harness_skips_finite_differences_at_a_kink():
    """|x| at x = 0 has no derivative: its one-sided differences disagree, so the element is
    left out of the FD comparison; elsewhere it is compared."""
    module = harness.load(_one_kernel("loss[None] += ti.abs(x[i]) + x[i] ** 2"))
    inst = harness.Instance(module, "interp", "f64", seed=0, check="off")
    inst.p["params"][0].from_numpy(np.array([0.0, 0.5, -0.25, 0.0]))
    central, smooth = inst.finite_differences()["x"]
    assert smooth.tolist() == [False, True, True, False]
    assert np.allclose(central[1:3], [2.0, -1.5])


def _one_kernel(line: str) -> str:
    return "\n".join([
        "import tinyad as ti", "N = 4", "", "def build(fp):",
        "    x = ti.field(fp, shape=N, needs_grad=True)",
        "    idx = ti.field(ti.i32, shape=N)",
        "    loss = ti.field(fp, shape=(), needs_grad=True)",
        "    @ti.kernel", "    def k():", "        for i in range(N):", f"            {line}",
        "    return dict(params=[x], data=[], ints=[idx], loss=loss, state=[],",
        "                launches=[(k, ())], sweep=None)", ""])


# ---- regressions: what the fuzzer found -----------------------------------------------------

def _dead_branch_program():
    """x -> y (read by nothing: its outputs do not reach the loss), x -> loss."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    y = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def unused():
        for i in x:
            y[i] = ti.sin(x[i])

    @ti.kernel
    def total():
        for i in x:
            loss[None] += x[i] * x[i]

    x.from_numpy(np.array([0.3, -0.5, 0.8, 1.1]))
    return x, loss, unused, total


@pytest.mark.parametrize("order", ["reverse", "dead-kernel-first"])
def test_manual_sweep_over_a_kernel_whose_outputs_do_not_reach_the_loss(mode, order, capsys):
    """Fuzzer seeds 26, 38, 42, 55: unused.grad() ran with y.grad all zero, which is its true
    output adjoint (y does not reach the loss), and was reported as an unseeded gradient."""
    x, loss, unused, total = _dead_branch_program()
    unused()
    total()
    loss.grad[None] = 1
    sweep = [total, unused] if order == "reverse" else [unused, total]
    for kernel in sweep:
        kernel.grad()
    assert np.allclose(x.grad.to_numpy(), 2 * x.to_numpy())

    def run_loss():
        loss[None] = 0
        total()
        return loss[None]
    assert np.allclose(x.grad.to_numpy(), finite_difference(run_loss, x), rtol=1e-6)
    assert "Unseeded" not in capsys.readouterr().err


def test_unseeded_sweep_is_still_reported(mode, capsys):
    """The narrowed check still warns of the mistake it is for: no gradient seeded anywhere."""
    _, _, unused, total = _dead_branch_program()
    unused()
    total()
    total.grad()
    assert "Unseeded gradient (warning)" in capsys.readouterr().err


def test_break_in_serial_loops_is_differentiated(mode):
    """Fuzzer seeds 17, 39, 96, 119 were refused ("`break` cannot be differentiated"): a `break`
    out of a serial for or while loop now becomes a flag in the adjoint kernel
    (tinyad/autodiff/breaks.py). Each element stops its loops at a different iteration."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            s = x[i]
            for j in range(5):
                s = ti.sin(s) * 1.5 + x[(i + j) % 4]
                if j == i:
                    break
                s = s * x[i]
            t = 0.5
            n = 0
            while n < 4:
                t = t * s
                n += 1
                if t > 1.0:
                    if n > 1:
                        break
                    t = t * 0.5
            for j in range(3):               # nested: the inner break leaves the inner loop
                for m in range(3):
                    if m > j:
                        break
                    t = t + ti.cos(x[m]) * 0.1
            loss[None] += s + t

    x.from_numpy(np.array([0.3, -0.5, 0.8, 1.1]))
    with ti.ad.Tape(loss):
        k()
    grad = x.grad.to_numpy()

    def run_loss():
        loss[None] = 0
        k()
        return loss[None]
    assert np.allclose(grad, finite_difference(run_loss, x), rtol=1e-6, atol=1e-9)
    x.grad.fill(0)
    k()                                      # by hand too, after a forward at this point
    loss.grad[None] = 1
    k.grad()
    assert np.allclose(x.grad.to_numpy(), grad)


def test_break_out_of_a_serialized_outermost_loop_is_differentiated(mode):
    x = ti.field(ti.f64, shape=6, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        acc = 0.0
        ti.loop_config(serialize=True)
        for i in range(6):
            acc = acc + ti.sin(x[i]) * acc + x[i]
            if acc > 1.5:
                break
        loss[None] = acc

    x.from_numpy(np.array([0.3, 0.5, 0.2, 0.6, 0.9, 0.1]))
    with ti.ad.Tape(loss):
        k()

    def run_loss():
        k()
        return loss[None]
    grad = x.grad.to_numpy()
    assert np.allclose(grad, finite_difference(run_loss, x), rtol=1e-6, atol=1e-9)
    assert grad[4:].tolist() == [0.0, 0.0]      # the loop stopped before reading them


def test_manual_sweep_of_a_kernel_launched_twice(mode):
    """A kernel that accumulates, launched twice alike in one forward pass, is swept twice. Each
    .grad() took the latest launch, so the first launch seemed never differentiated and the
    sweep of the kernel before it was reported as "Adjoints out of order"."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    s = ti.field(ti.f64, shape=4, needs_grad=True)
    y = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def sine():
        for i in x:
            s[i] = ti.sin(x[i])

    @ti.kernel
    def accumulate():
        for i in x:
            y[i] += s[i] ** 2

    @ti.kernel
    def total():
        for i in x:
            loss[None] += y[i]

    def forward():
        y.fill(0)
        loss[None] = 0
        sine()
        accumulate()
        accumulate()
        total()
        return loss[None]

    x.from_numpy(np.array([0.3, -0.5, 0.8, 1.1]))
    forward()
    loss.grad[None] = 1
    for kernel in (total, accumulate, accumulate, sine):
        kernel.grad()
    v = x.to_numpy()
    assert np.allclose(x.grad.to_numpy(), 4 * np.sin(v) * np.cos(v))
    assert np.allclose(x.grad.to_numpy(), finite_difference(forward, x), rtol=1e-6)


@pytest.mark.skipif(MODES != ["interp", "fast"], reason="needs both modes")
def test_an_atomic_min_winner_keeps_its_gradient_beside_unrelated_code():
    """Fuzzer seed 3000180 (`--small`): k2 atomic_mins (m @ m.T)[0, 2] into y1 and computes a
    dead b5 = abs(... % ...). Fast-math let LLVM round the winner's value in k2 and its
    recomputation in k2's adjoint differently (the dead code changed what it fused), so the
    adjoint's `value == y1[j]` failed and m lost the winner's gradient. Kernels whose results
    hang on float equality now compile without fast-math (compile/pysource.py)."""
    program = gen.generate_seeded(3000180, small=True)
    assert_clean(program, harness.check(program, modes=("interp", "fast"), seed=3000180))
