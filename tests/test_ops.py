"""The op table (tinyad/core/ops.py), op by op.

- coverage: every consumer of the table (the interpreter's numeric and sympy domains, the IR
  printer, the CPU and CUDA code writers) handles every op, for each dtype the op takes; a
  missing entry fails naming the op and the consumer;
- derivatives: every differentiable op's partials, run as IR by the interpreter, equal
  sympy.diff of its `sym` at random points of its domain, and sympy's limit at the points
  where the plain formula is NaN (pow at base 0);
- the same guarded points through a real kernel and ti.ad.Tape, in both modes.
"""
import re

import numpy as np
import pytest
import sympy as sp

import tinyad as ti
from tinyad.compile.cuda import _SimulatorLibdevice
from tinyad.compile.cudasource import generate_cuda
from tinyad.compile.pysource import generate_cpu
from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.ops import TABLE
from tinyad.core.printer import format_expr
from tinyad.interp.domain import NUMERIC
from tinyad.interp.evaluator import Frame, _Compiler
from tinyad.interp.symbolic import SymbolicDomain
from tinyad.interp.symparts import SymbolicUnsupported

RNG = np.random.default_rng(0)   # for the random op's evaluation


# ---- coverage -----------------------------------------------------------------------------------
def _dtypes(spec):
    """The operand dtypes each op is tried with (None: the op's own arrangement)."""
    return {"arith": [T.f64, T.f32, T.i32], "float": [T.f64, T.f32], "compare": [T.f64, T.i32],
            "logic": [T.i32], "int": [T.i32]}.get(spec.kind, [None])


def _examples(spec):
    """(node, {argument name: dtype}) per dtype: the op applied to kernel arguments."""
    if spec.kind == "select":
        c, a, b = ir.Var("c", T.i32), ir.Var("a", T.f64), ir.Var("b", T.f64)
        yield ir.Op(spec.name, (c, a, b), T.f64), {"c": T.i32, "a": T.f64, "b": T.f64}
    elif spec.kind == "cast":
        for source, target in ((T.f64, T.f32), (T.f32, T.i32), (T.i32, T.f64)):
            yield ir.Op(spec.name, (ir.Var("a", source),), target), {"a": source}
    elif spec.kind == "random":
        for dtype in (T.f64, T.f32):
            yield ir.Op(spec.name, (), dtype), {}
    else:
        for dtype in _dtypes(spec):
            names = "abc"[:spec.arity]
            args = tuple(ir.Var(n, dtype) for n in names)
            result = T.i32 if spec.kind in ("compare", "logic") else dtype
            yield ir.Op(spec.name, args, result), {n: dtype for n in names}


def _numeric(e, argtypes):
    ti.init(mode="interp")       # a random generator for `random`
    env = {n: d.np(1) for n, d in argtypes.items()}
    value = _Compiler(NUMERIC).expr(e)(Frame(env, None, RNG))
    assert type(value) is e.dtype.np, f"gave {type(value).__name__}, not {e.dtype}"


def _symbolic(e, argtypes):
    env = {n: sp.Integer(1) if d.is_int else sp.Symbol(n, real=True) for n, d in argtypes.items()}
    run = _Compiler(SymbolicDomain()).expr(e)
    if e.op == "random":          # the one op with no formula: it must say so
        with pytest.raises(SymbolicUnsupported, match="no formula"):
            run(Frame(env, None, RNG))
        return
    run(Frame(env, None, RNG))


def _printer(e, argtypes):
    text = format_expr(e)
    assert all(name in text for name in argtypes), text


def _kernel(e, argtypes):
    args = tuple(ir.Arg(n, d) for n, d in argtypes.items())
    return ir.Kernel(f"one_{e.op}", args, (ir.Return(e),), e.dtype)


def _cpu(e, argtypes):
    compile(generate_cpu(_kernel(e, argtypes)).source, "<cpu>", "exec")


def _cuda(e, argtypes):
    source = generate_cuda(_kernel(e, argtypes)).source
    compile(source, "<cuda>", "exec")
    for name in re.findall(r"libdevice\.(\w+)", source):   # the simulator must have it too
        assert hasattr(_SimulatorLibdevice, name), f"cuda.py's _SimulatorLibdevice lacks {name}"


CONSUMERS = {"numeric domain (interp/domain.py)": _numeric,
             "sympy domain (interp/symbolic.py)": _symbolic,
             "printer (core/printer.py)": _printer,
             "CPU writer (compile/op_spellings.py CPU_SPELLINGS)": _cpu,
             "CUDA writer (compile/op_spellings.py CUDA_SPELLINGS)": _cuda}


def test_every_consumer_handles_every_op():
    missing = []
    for spec in TABLE.values():
        for e, argtypes in _examples(spec):
            for consumer, check in CONSUMERS.items():
                try:
                    check(e, argtypes)
                except Exception as exc:  # noqa: BLE001  (any failure is a missing case)
                    missing.append(f"op {spec.name!r} ({e.dtype}): {consumer}: "
                                   f"{type(exc).__name__}: {exc}")
    assert not missing, "ops that a consumer does not handle:\n" + "\n".join(missing)


def test_python_operators_reach_the_table():
    """Each operator a row names builds that op on expressions and on matrices alike."""
    from tinyad.core.ops import PYTHON_OPERATORS, dunder_operators
    assert len(PYTHON_OPERATORS) == 18
    x, y = ir.Var("x", T.i32), ir.Var("y", T.i32)
    for dunder, name, reflected in dunder_operators():
        e = getattr(x, dunder)(y)
        assert isinstance(e, ir.Op) and e.op == name
        operands = tuple(a.args[0] if isinstance(a, ir.Op) else a for a in e.args)  # `/` casts
        assert operands == ((y, x) if reflected else (x, y))
        m = getattr(ti.Vector([x, x]), dunder)(y)
        assert [v.op for v in m.entries] == [name, name]


# ---- per-op derivatives -------------------------------------------------------------------------
# Where each op is differentiable: a sampler per argument, (rng) -> value.
def _uniform(lo, hi):
    return lambda rng: rng.uniform(lo, hi)


def _away_from_zero(rng):
    return rng.uniform(0.2, 2.0) * rng.choice([-1.0, 1.0])


DOMAINS = {
    "truediv": (_uniform(-2, 2), _away_from_zero),
    "pow": (_uniform(0.1, 3.0), _uniform(-2, 2)),
    "tan": (_uniform(-1.2, 1.2),),
    "asin": (_uniform(-0.95, 0.95),), "acos": (_uniform(-0.95, 0.95),),
    "log": (_uniform(0.1, 3.0),), "sqrt": (_uniform(0.1, 3.0),), "rsqrt": (_uniform(0.1, 3.0),),
    "abs": (_away_from_zero,),
}
# Differentiable ops whose form is structure, not a formula: select passes the chosen operand's
# gradient, cast passes it through (reverse mode's tests cover both).
NO_FORMULA = {"select", "cast"}
DIFFERENTIABLE = [name for name, spec in TABLE.items() if spec.differentiable
                  and name not in NO_FORMULA]


def _run_partials(spec, values):
    """The op's partials at `values`, built as IR and run by the interpreter in f64."""
    names = [f"a{k}" for k in range(spec.arity)]
    args = tuple(ir.Var(n, T.f64) for n in names)
    env = {n: np.float64(v) for n, v in zip(names, values)}
    with np.errstate(all="ignore"):
        env["out"] = np.float64(spec.eval(*env.values()))
        partials = spec.partials(args, ir.Var("out", T.f64))
        out = []
        for partial in partials:
            if partial is None:
                out.append(0.0)
            elif B.is_expr(partial):
                out.append(float(_Compiler(NUMERIC).expr(partial)(Frame(env, None, RNG))))
            else:
                out.append(float(partial))
    return out


def _symbols(spec):
    return [sp.Symbol(f"a{k}", real=True) for k in range(spec.arity)]


def test_every_differentiable_op_has_a_formula():
    without = {name for name, spec in TABLE.items() if spec.differentiable and spec.sym is None}
    assert without == NO_FORMULA


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_partials_equal_sympy_derivatives(name):
    spec = TABLE[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    symbols = _symbols(spec)
    formula = spec.sym(*symbols)
    truths = [sp.lambdify(symbols, sp.diff(formula, s), "mpmath") for s in symbols]
    samplers = DOMAINS.get(name, (_uniform(-2, 2),) * spec.arity)
    for _ in range(6):
        point = [sample(rng) for sample in samplers]
        got = _run_partials(spec, point)
        for k, truth in enumerate(truths):
            want = float(truth(*point))
            assert got[k] == pytest.approx(want, rel=1e-9, abs=1e-12), \
                f"d{name}/d(arg {k}) at {point}: {got[k]}, sympy says {want}"


# (op, point, argument): the plain formula is NaN there, the derivative is finite. The truth is
# sympy's limit as the first argument goes to the point's value from the right.
GUARDED = [("pow", (0.0, 2.0), 0), ("pow", (0.0, 2.0), 1), ("pow", (0.0, 3.5), 1),
           ("pow", (0.0, 1.0), 0), ("pow", (0.0, 1.0), 1), ("pow", (0.0, 0.0), 0),
           ("pow", (2.0, 0.0), 0), ("pow", (-1.5, 0.0), 0), ("pow", (0.0, -0.0), 0)]


@pytest.mark.parametrize("name, point, k", GUARDED)
def test_guarded_partials_equal_sympy_limits(name, point, k):
    spec = TABLE[name]
    symbols = _symbols(spec)
    derivative = sp.diff(spec.sym(*symbols), symbols[k])
    derivative = derivative.subs({s: sp.nsimplify(v) for s, v in zip(symbols[1:], point[1:])})
    want = float(sp.limit(derivative, symbols[0], sp.nsimplify(point[0]), "+"))
    assert _run_partials(spec, point)[k] == pytest.approx(want, abs=1e-12)


# ---- through a kernel ---------------------------------------------------------------------------
# (x, y, dloss/dx, dloss/dy or None where undefined) for loss = x ** y
POW_POINTS = [(0.0, 2.0, 0.0, 0.0), (0.0, 3.5, 0.0, 0.0), (0.0, 1.0, 1.0, 0.0),
              (0.0, 0.0, 0.0, None), (2.0, 0.0, 0.0, np.log(2.0)),
              (1.5, 2.0, 3.0, 2.25 * np.log(1.5))]


def test_pow_gradients_at_base_zero_are_finite(mode):
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    y = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def power():
        loss[None] = x[None] ** y[None]

    for xv, yv, dx, dy in POW_POINTS:
        x[None], y[None] = xv, yv
        if dy is None:    # d/dy 0^y at y = 0 is -inf: checked, that is a report, not a number
            with ti.ad.Tape(loss=loss):
                power()
            with pytest.raises(ti.NonFiniteGradientError, match="y.grad"):
                y.grad[None]
            continue
        with ti.ad.Tape(loss=loss):
            power()
        assert x.grad[None] == pytest.approx(dx, abs=1e-12), (xv, yv)
        if dy is not None:
            assert y.grad[None] == pytest.approx(dy, abs=1e-12), (xv, yv)


# ---- forward mode: each op's tangent rule -------------------------------------------------------
CHOICE_POINTS = {"select": (lambda rng: float(rng.integers(0, 2)), _uniform(-2, 2), _uniform(-2, 2))}


def _run_jvp(spec, values, dots):
    """The op's tangent (its jvp, or the product form of its partials) at `values` in the
    direction `dots` (None: the argument carries no tangent), run as IR by the interpreter."""
    from tinyad.autodiff.forward import product_jvp
    names = [f"a{k}" for k in range(spec.arity)]
    dtypes = [T.i32 if spec.kind == "select" and k == 0 else T.f64 for k in range(spec.arity)]
    args = tuple(ir.Var(n, d) for n, d in zip(names, dtypes))
    env = {n: d.np(v) for n, d, v in zip(names, dtypes, values)}
    dot_vars = tuple(None if d is None else ir.Var(f"v{k}", T.f64) for k, d in enumerate(dots))
    with np.errstate(all="ignore"):
        env["out"] = np.float64(spec.eval(*env.values()) if spec.kind != "select"
                                else (values[1] if values[0] else values[2]))
        env.update({f"v{k}": np.float64(d) for k, d in enumerate(dots) if d is not None})
        rule = spec.jvp or (lambda *a: product_jvp(spec, *a))
        tangent = rule(args, ir.Var("out", T.f64), dot_vars)
        if not B.is_expr(tangent):
            return float(tangent or 0.0)
        return float(_Compiler(NUMERIC).expr(tangent)(Frame(env, None, RNG)))


@pytest.mark.parametrize("name", DIFFERENTIABLE + ["select"])
def test_tangents_equal_finite_differences_and_the_adjoint(name):
    """<u, J v> from the op's tangent rule == central differences along v, and == <J^T u, v>
    from its partials (the reverse-mode rule): the two modes' rules agree."""
    spec = TABLE[name]
    rng = np.random.default_rng(sum(map(ord, name)) + 1)
    samplers = CHOICE_POINTS.get(name) or DOMAINS.get(name, (_uniform(-2, 2),) * spec.arity)
    differentiable_args = range(1, 3) if name == "select" else range(spec.arity)

    def value_at(point):
        return point[1] if name == "select" and point[0] else (
            point[2] if name == "select" else spec.eval(*map(np.float64, point)))
    for trial in range(6):
        point = [sample(rng) for sample in samplers]
        v = [rng.uniform(-1, 1) if k in differentiable_args else None for k in range(spec.arity)]
        if trial % 3 and len(differentiable_args) > 1:   # one argument carries no tangent
            v[differentiable_args[trial % 3 - 1]] = None
        u = rng.uniform(-1, 1)
        jv = _run_jvp(spec, point, v)
        h = 1e-6
        plus = [p + h * (d or 0.0) for p, d in zip(point, v)]
        minus = [p - h * (d or 0.0) for p, d in zip(point, v)]
        fd = (float(value_at(plus)) - float(value_at(minus))) / (2 * h)
        assert jv == pytest.approx(fd, rel=1e-6, abs=1e-7), f"{name} at {point} along {v}"
        if name == "select":
            partials = [0.0, float(point[0] != 0), float(point[0] == 0)]
        else:
            partials = _run_partials(spec, point)
        vjp_dot_v = sum(u * p * d for p, d in zip(partials, v) if d is not None)
        assert u * jv == pytest.approx(vjp_dot_v, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("name", ["select", "min", "max"])
def test_a_choice_passes_the_chosen_tangent_even_when_the_other_is_nan(name):
    """The product form gives 0 * nan = nan; the jvp column passes the chosen operand's."""
    spec = TABLE[name]
    point = (1, 2.0, 5.0) if name == "select" else ((2.0, 5.0) if name == "min" else (5.0, 2.0))
    dots = (None, 3.0, np.nan) if name == "select" else (3.0, np.nan)
    assert _run_jvp(spec, point, dots) == 3.0
