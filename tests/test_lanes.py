"""Interp mode's vectorised lanes (interp/lanes.py) against the scalar evaluator, the reference.

Each program runs twice in interp mode, once with lanes (the default) and once with
TINYAD_INTERP_LANES=0, with the checker on and off; values and gradients must be equal (bit for
bit, except sums that lanes add in another order). Every op of core/ops.py runs through both as
one IR kernel per op and dtype.
"""
import numpy as np
import pytest

import tinyad as ti
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import TinyadIndexError
from tinyad.core.ops import TABLE
from tinyad.interp import lanes
from tinyad.interp.evaluator import Program
from tinyad.interp.memory import Memory
from tinyad.runtime import runtime as state

N = 37   # lanes: not a power of two


# ---- every op, as IR ----------------------------------------------------------------------------
def _inputs(dtype, rng, k):
    if dtype.is_int:   # the second operand is never 0: integer // and % by zero raise
        return rng.integers(-3, 8, N).astype(dtype.np) if k == 0 else \
            rng.integers(1, 8, N).astype(dtype.np)
    values = rng.normal(0, 2, N)
    values[:4] = (0.0, -0.0, 1.0, np.nan)
    return values.astype(dtype.np)


def _op_cases():
    for spec in TABLE.values():
        if spec.kind == "random":
            continue
        if spec.kind == "select":
            yield spec, (T.i32, T.f64, T.f64), T.f64
        elif spec.kind == "cast":
            for source, target in ((T.f64, T.f32), (T.f32, T.i32), (T.i32, T.f64)):
                yield spec, (source,), target
        else:
            kinds = {"arith": [T.f64, T.f32, T.i32], "float": [T.f64, T.f32],
                     "compare": [T.f64, T.i32], "logic": [T.i32], "int": [T.i32]}[spec.kind]
            for dtype in kinds:
                out = T.i32 if spec.kind in ("compare", "logic") else dtype
                yield spec, (dtype,) * spec.arity, out


def _run_op_kernel(spec, argtypes, out_type, use_lanes, monkeypatch):
    monkeypatch.setenv(lanes.ENV_SWITCH, "1" if use_lanes else "0")
    rng = np.random.default_rng(1)
    ins = [ti.field(d, shape=N) for d in argtypes]
    for k, f in enumerate(ins):
        f.from_numpy(_inputs(argtypes[k], rng, k))
    out = ti.field(out_type, shape=N)
    i = ir.Var("i", T.i32)
    value = ir.Op(spec.name, tuple(ir.Load(f, (i,), f.dtype) for f in ins), out_type)
    loop = ir.For("i", ir.Const(0, T.i32), ir.Const(N, T.i32), (ir.Store(out, (i,), value),),
                  parallel=True)
    Program(ir.Kernel(f"one_{spec.name}", (), (loop,))).run((), memory=Memory())
    return out.to_numpy()


@pytest.mark.parametrize("spec,argtypes,out_type", list(_op_cases()),
                         ids=lambda v: getattr(v, "name", None) or str(v))
def test_every_op_gives_the_scalar_paths_values(spec, argtypes, out_type, monkeypatch):
    ti.init(mode="interp")
    scalar = _run_op_kernel(spec, argtypes, out_type, False, monkeypatch)
    vector = _run_op_kernel(spec, argtypes, out_type, True, monkeypatch)
    assert vector.dtype == scalar.dtype
    np.testing.assert_array_equal(vector, scalar)


@pytest.mark.parametrize("use_lanes", [False, True])
def test_integer_division_by_zero_raises_on_both_paths(use_lanes, monkeypatch):
    """One lane dividing by zero stops the launch with the scalar path's error; a lane masked
    off by an `if` does not."""
    monkeypatch.setenv(lanes.ENV_SWITCH, "1" if use_lanes else "0")
    ti.init(mode="interp")
    a = ti.field(ti.i32, shape=4)
    b = ti.field(ti.i32, shape=4)

    @ti.kernel
    def guarded():
        for i in a:
            if b[i] != 0:
                a[i] = a[i] // b[i]

    @ti.kernel
    def unguarded():
        for i in a:
            a[i] = a[i] // b[i]

    a.from_numpy(np.array([7, 8, 9, 10], np.int32))
    b.from_numpy(np.array([2, 0, 3, 1], np.int32))
    guarded()
    assert a.to_numpy().tolist() == [3, 8, 3, 10]
    with pytest.raises(ti.TinyadRuntimeError, match="integer division by zero"):
        unguarded()


def test_random_stays_on_the_scalar_path():
    loop = ir.For("i", ir.Const(0, T.i32), ir.Const(4, T.i32),
                  (ir.Assign("r", ir.Op("random", (), T.f32)),), parallel=True)
    assert lanes.compile_loop(loop, lambda fr: None, (None, None)) is None


# ---- programs, with and without the checker, values and gradients ------------------------------
def _program(n=N):
    """A kernel with ifs, selects guarding out-of-range loads, inner loops with uniform and
    per-lane bounds, atomics, vectors and a stencil; -> (x, loss) after a Tape."""
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    v = ti.Vector.field(2, ti.f32, shape=n, needs_grad=True)
    y = ti.field(ti.f32, shape=n, needs_grad=True)
    hist = ti.field(ti.i32, shape=4)
    c = ti.field(ti.f32, shape=n)
    lo = ti.field(ti.f32, shape=())
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def forward():
        for i in range(n):
            a = x[i]
            left = 0.0
            if i > 0:
                left = x[i - 1]
            c_left = ti.select(i > 0, c[i - 1], 0.0)        # guarded: no load at i = 0
            right = 0.0
            if i < n - 1:
                right = x[i + 1]
            s = 0.0
            for k in range(3):
                s += ti.sin(a * k) * 0.5
            for k in range(i % 4):                          # bounds that differ per lane
                s += ti.exp(-a * k) * 0.1
            w = ti.Vector([a, left])
            if a > 0.2:
                w = w * 2.0 + ti.Vector([right, 1.0])
            elif a < -0.5:
                w = ti.Vector([ti.sqrt(ti.abs(a)), ti.max(a, left)])
            v[i] = w
            y[i] = c_left * s + w.norm() + (left + right - 2 * a) ** 2
            hist[i % 4] += 1
            ti.atomic_min(lo[None], a)

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += y[i] * v[i][0] + v[i][1] ** 2

    rng = np.random.default_rng(3)
    x.from_numpy(rng.normal(0, 1, n).astype(np.float32))
    c.from_numpy(rng.normal(0, 1, n).astype(np.float32))
    lo[None] = 10.0
    with ti.ad.Tape(loss):
        forward()
        total()
    return {"y": y.to_numpy(), "v": v.to_numpy(), "hist": hist.to_numpy(), "lo": lo[None],
            "loss": loss[None], "x.grad": x.grad.to_numpy()}


@pytest.mark.parametrize("check", ["error", "off"])
def test_program_values_and_gradients_match_the_scalar_path(check, monkeypatch):
    results = []
    for use_lanes in (False, True):
        monkeypatch.setenv(lanes.ENV_SWITCH, "1" if use_lanes else "0")
        ti.init(mode="interp", check=check)
        results.append(_program())
    scalar, vector = results
    for name in ("y", "v", "hist", "lo"):     # f32 values rounded alike, bit for bit
        np.testing.assert_array_equal(vector[name], scalar[name], err_msg=name)
    # Sums of several lanes' += into one element (loss; x.grad[i] gets its neighbours' too):
    # lanes add statement by statement, the scalar loop iteration by iteration: f32 rounding.
    assert vector["loss"] == pytest.approx(scalar["loss"], rel=1e-5)
    np.testing.assert_allclose(vector["x.grad"], scalar["x.grad"], rtol=1e-6, atol=1e-6)


def test_gradients_match_finite_differences_with_lanes(monkeypatch):
    """An independent truth for the lane path: central differences in f64."""
    monkeypatch.setenv(lanes.ENV_SWITCH, "1")
    ti.init(mode="interp", default_fp=ti.f64)
    n = 9
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        for i in range(n):
            t = x[i] * x[(i + 1) % n]
            for k in range(i % 3):
                t = ti.sin(t) + x[i]
            if t > 0:
                loss[None] += t * t
            else:
                loss[None] += ti.exp(t)

    start = np.linspace(-1.0, 1.2, n)
    x.from_numpy(start)
    with ti.ad.Tape(loss):
        f()
    grad = x.grad.to_numpy()

    def value(at):
        x.from_numpy(at)
        loss[None] = 0.0
        f()
        return loss[None]
    h = 1e-6
    for j in range(n):
        e = np.zeros(n)
        e[j] = h
        fd = (value(start + e) - value(start - e)) / (2 * h)
        assert grad[j] == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("check", ["error", "off"])
def test_out_of_bounds_in_a_lane_names_the_users_line(check, monkeypatch):
    monkeypatch.setenv(lanes.ENV_SWITCH, "1")
    ti.init(mode="interp", check=check)
    x = ti.field(ti.f32, shape=8)

    @ti.kernel
    def shift():
        for i in range(8):
            x[i] = x[i + 1]       # the marked line

    with pytest.raises(TinyadIndexError) as info:
        shift()
    assert "index (8,)" in str(info.value)
    assert "x[i] = x[i + 1]       # the marked line" in str(info.value)


def test_a_loop_that_carries_a_kernel_local_stays_scalar(monkeypatch):
    """`s` is assigned before the loop and in it: carried across iterations (a serial sum)."""
    monkeypatch.setenv(lanes.ENV_SWITCH, "1")
    ti.init(mode="interp")
    m = ti.field(ti.f32, shape=())

    @ti.kernel
    def carried():
        s = 0.0
        for i in range(4):
            s += i * 0.5
        for i in range(3):
            ti.atomic_max(m[None], s + i)

    carried()
    assert m[None] == 3.0 + 2.0


def _violating_program():
    """Rule 1 inside a parallel loop (x read, then overwritten) and a harmless race (every
    lane stores the same value into `flag`): warn mode reports and goes on."""
    n = 6
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    flag = ti.field(ti.f32, shape=())
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def square_in_place():
        for i in range(n):
            x[i] = x[i] * x[i]
            flag[None] = 1.0
            loss[None] += x[i]

    x.from_numpy(np.arange(n, dtype=np.float32) + 1)
    with ti.ad.Tape(loss):
        square_in_place()
    problems = [(p.report.rule, sorted(p.elements)) for p in state.backend.checks.problems()]
    return x.to_numpy(), flag[None], loss[None], problems


def test_a_violation_in_lanes_is_reported_as_the_scalar_path_reports_it(monkeypatch, capsys):
    results = []
    for use_lanes in (False, True):
        monkeypatch.setenv(lanes.ENV_SWITCH, "1" if use_lanes else "0")
        ti.init(mode="interp", check="warn")
        results.append((_violating_program(), capsys.readouterr().err))
    (scalar, scalar_err), (vector, vector_err) = results
    np.testing.assert_array_equal(vector[0], scalar[0])
    assert vector[1:] == scalar[1:]
    assert [rule for rule, _ in vector[3]] == ["Global Data Access Rule 1"], vector[3]
    assert vector_err == scalar_err


@pytest.mark.parametrize("check", ["error", "off"])
def test_saves_on_both_sides_of_a_branch_restore_lane_by_lane(check, monkeypatch):
    """A local mutated on both sides of an `if` in a serial loop: each side saves it for its own
    lanes, and the adjoint must restore each lane's own value (interp/lanestack.py). Lanes that
    take different sides in different iterations, against the scalar path and the analytic
    derivative."""
    def gradient(use_lanes):
        monkeypatch.setenv(lanes.ENV_SWITCH, "1" if use_lanes else "0")
        ti.init(mode="interp", default_fp=ti.f64, check=check)
        x = ti.field(ti.f64, shape=6, needs_grad=True)
        loss = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def run():
            for i in x:
                t = x[i]
                for _ in range(3):
                    if t > 0.5:
                        t = t * t
                    else:
                        t = 2.0 * t + 0.3
                loss[None] += t

        x.from_numpy(np.array([0.2, -0.4, 0.9, 0.45, 0.6, -1.0]))
        with ti.ad.Tape(loss):
            run()
        return x.grad.to_numpy()

    def analytic(v):
        t, d = v, 1.0
        for _ in range(3):
            t, d = (t * t, 2 * t * d) if t > 0.5 else (2 * t + 0.3, 2 * d)
        return d

    scalar, laned = gradient(False), gradient(True)
    np.testing.assert_array_equal(laned, scalar)
    np.testing.assert_allclose(laned, [analytic(v) for v in (0.2, -0.4, 0.9, 0.45, 0.6, -1.0)],
                               rtol=1e-12)
