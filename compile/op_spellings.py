"""How each op of the table (tinyad/core/ops.py) is written in the generated Python, per target.

One entry per op name: a function (writer, node) -> (text, precedence, exact), where the writer
is the generator (compile/pyexpr.py's ExprWriter) and `exact` False means an integer that is
right only modulo 2**bits (the writer wraps it where the value matters). CUDA_SPELLINGS is
CPU_SPELLINGS with the entries numba's CUDA target needs instead (libdevice, builtins).
tests/test_ops.py checks both against the op table.
"""
from __future__ import annotations

from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.ops import ATOM, MUL, POW, TABLE, UNARY

# Integer ops whose result, computed wide, is still right modulo 2**bits ("ring" ops).
RING = {"add", "sub", "mul", "neg", "bit_and", "bit_or", "bit_xor", "bit_not", "shl"}


def _infix(exact_for_ints: bool = True):
    """`a + b`: Python's own operator, the table's infix spelling and precedence."""
    def write(w, e):
        spec, (a, b) = TABLE[e.op], e.args
        symbol, prec = spec.infix, spec.precedence
        if e.dtype.is_int and e.op in RING:
            return f"{w.ring_operand(a, prec)} {symbol} {w.ring_operand(b, prec + 1)}", prec, False
        return (f"{w.operand(a, prec)} {symbol} {w.operand(b, prec + 1)}", prec,
                exact_for_ints or not e.dtype.is_int)
    return write


def _prefix(symbol: str):
    def write(w, e):
        if e.dtype.is_int:
            return f"{symbol}{w.ring_operand(e.args[0], UNARY)}", UNARY, False
        return f"{symbol}{w.operand(e.args[0], UNARY)}", UNARY, True
    return write


def _power(w, e):
    base, exponent = w.operand(e.args[0], POW + 1), w.operand(e.args[1], UNARY)
    return f"{base} ** {exponent}", POW, not e.dtype.is_int


def _truth(w, e):
    """Comparisons and logic: a Python truth value, as the IR's i32 0 or 1."""
    return f"int32({w.cond(e)})", ATOM, True


def _select(w, e):
    cond, a, b = w.cond(e.args[0]), w.value(e.args[1]), w.value(e.args[2])
    if any(isinstance(x, ir.Load) for x in (*ir.walk_expr(e.args[1]), *ir.walk_expr(e.args[2]))):
        return f"({a} if {cond} else {b})", ATOM, True     # only the chosen load runs
    w.helpers.add("select")
    return f"select({cond}, {a}, {b})", ATOM, True


def _cast(w, e):
    if e.args[0].dtype == e.dtype:
        return w.expr(e.args[0])
    return w.wrap(w.value(e.args[0]), e.dtype), ATOM, True


def _same(w, e):
    """stop_grad: the value itself."""
    return w.expr(e.args[0])


def _abs(w, e):
    return f"abs({w.value(e.args[0])})", ATOM, not e.dtype.is_int


def _extremum_numpy(w, e):
    """min/max: numpy's fmin/fmax for floats (a NaN operand is dropped, as in Taichi and the
    interpreter), builtins for ints."""
    a, b = w.value(e.args[0]), w.value(e.args[1])
    if e.dtype.is_int:
        return f"{e.op}({a}, {b})", ATOM, True
    return f"np.f{e.op}({a}, {b})", ATOM, True


def _extremum_libdevice(w, e):
    """min/max on CUDA: libdevice's fmin/fmax for floats (NaN dropped), builtins for ints."""
    a, b = w.value(e.args[0]), w.value(e.args[1])
    if e.dtype.is_int:
        return f"{e.op}({a}, {b})", ATOM, True
    suffix = "f" if e.dtype == T.f32 else ""
    return f"libdevice.f{e.op}{suffix}({a}, {b})", ATOM, True


def _rounding_numpy(function: str):
    """floor/ceil/round of a float (an integer is its own)."""
    def write(w, e):
        if e.dtype.is_int:
            return w.expr(e.args[0])
        return f"{function}({w.value(e.args[0])})", ATOM, True
    return write


def _rounding_libdevice(f32_name: str, f64_name: str):
    def write(w, e):
        if e.dtype.is_int:
            return w.expr(e.args[0])
        name = f32_name if e.dtype == T.f32 else f64_name
        return f"libdevice.{name}({w.value(e.args[0])})", ATOM, True
    return write


def _rsqrt(w, e):
    one = w.f32_constant(1.0) if e.dtype == T.f32 else "1.0"
    return f"{one} / math.sqrt({w.value(e.args[0])})", MUL, True


def _call(function: str):
    def write(w, e):
        return f"{function}({', '.join(w.value(a) for a in e.args)})", ATOM, True
    return write


def _random(w, e):
    """A value the kernel draws ahead of the expression (pysource.hoist_random)."""
    return w.random_names[id(e)], ATOM, True


CPU_SPELLINGS = {
    "add": _infix(), "sub": _infix(), "mul": _infix(), "truediv": _infix(),
    "floordiv": _infix(exact_for_ints=False), "mod": _infix(),
    "pow": _power, "neg": _prefix("-"), "abs": _abs,
    "min": _extremum_numpy, "max": _extremum_numpy,
    "sin": _call("math.sin"), "cos": _call("math.cos"), "tan": _call("math.tan"),
    "asin": _call("math.asin"), "acos": _call("math.acos"), "atan": _call("math.atan"),
    "atan2": _call("math.atan2"), "tanh": _call("math.tanh"), "exp": _call("math.exp"),
    "log": _call("math.log"), "sqrt": _call("math.sqrt"), "rsqrt": _rsqrt,
    "floor": _rounding_numpy("np.floor"), "ceil": _rounding_numpy("np.ceil"),
    "round": _rounding_numpy("np.rint"),
    "lt": _truth, "le": _truth, "gt": _truth, "ge": _truth, "eq": _truth, "ne": _truth,
    "and": _truth, "or": _truth, "not": _truth,
    "bit_and": _infix(), "bit_or": _infix(), "bit_xor": _infix(), "shl": _infix(),
    "shr": _infix(), "bit_not": _prefix("~"),
    "select": _select, "cast": _cast, "stop_grad": _same, "random": _random,
}

CUDA_SPELLINGS = {
    **CPU_SPELLINGS,
    "min": _extremum_libdevice, "max": _extremum_libdevice,
    "floor": _rounding_libdevice("floorf", "floor"), "ceil": _rounding_libdevice("ceilf", "ceil"),
    "round": _rounding_libdevice("rintf", "rint"),
}

SPELLINGS = {"cpu": CPU_SPELLINGS, "cuda": CUDA_SPELLINGS}
