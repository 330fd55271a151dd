"""Building typed IR expressions, with Taichi's typing rules.

These functions accept IR expressions, Python numbers and numpy scalars alike. When no IR
expression is involved they simply compute the value (constant folding), so the same code
serves Python-scope vectors, `ti.static` arithmetic and kernel tracing.
"""
from __future__ import annotations

import contextlib
import contextvars
import numbers

import numpy as np

from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import TinyadTypeError
from tinyad.core.srcloc import UNKNOWN, SrcLoc

# The user's source location the frontend is visiting; new nodes are stamped with it.
_current_loc: contextvars.ContextVar = contextvars.ContextVar("tinyad_loc", default=UNKNOWN)


@contextlib.contextmanager
def at(loc: SrcLoc):
    token = _current_loc.set(loc)
    try:
        yield
    finally:
        _current_loc.reset(token)


def current_loc() -> SrcLoc:
    return _current_loc.get()


# While a kernel is traced, the frontend installs a function here that stores a value in a new
# kernel local and returns a read of it. Library code (tinyad/linalg.py) passes reused values
# through `local()`, so a long chain of shared sub-expressions runs once, instead of being copied
# into every expression tree that uses it (such trees grow exponentially).
_local_sink: contextvars.ContextVar = contextvars.ContextVar("tinyad_local_sink", default=None)


@contextlib.contextmanager
def local_sink(sink):
    token = _local_sink.set(sink)
    try:
        yield
    finally:
        _local_sink.reset(token)


def local(value, base: str = "t"):
    """`value`, kept in a fresh kernel local while tracing; numbers and leaves pass through."""
    sink = _local_sink.get()
    if sink is None or not isinstance(value, ir.Op):
        return value
    return sink(value, base)


def is_expr(value) -> bool:
    return isinstance(value, ir.Expr)


def python_dtype(value) -> T.DType:
    """The dtype a Python or numpy constant gets inside a kernel."""
    if isinstance(value, np.generic):
        return T.from_numpy(value.dtype)
    if isinstance(value, (bool, numbers.Integral)):
        return T.typing_defaults().ip
    if isinstance(value, numbers.Real):
        return T.typing_defaults().fp
    raise TinyadTypeError(f"{type(value).__name__} value {value!r} cannot be used as a number "
                          "in a kernel", current_loc())


def const(value, dtype: T.DType | None = None) -> ir.Const:
    """A constant of `dtype` (by default the type a Python number gets in a kernel); an integer
    the type cannot hold is refused, as Taichi refuses it (`0x80000000` under i32, u16(-1))."""
    defaulted = dtype is None
    dtype = dtype or python_dtype(value)
    if dtype.is_float:
        return ir.Const(dtype.np(value).item(), dtype, current_loc())
    value = int(value)
    low, high = T.int_range(dtype)
    if not low <= value <= high:
        raise TinyadTypeError(
            f"integer literal {value} is outside the range of default_ip {dtype}" if defaulted
            else f"{value} is outside the range of {dtype}", current_loc(),
            hint=f"give it a wider type, e.g. ti.i64({value}), or ti.init(default_ip=ti.i64)"
            if defaulted else f"{dtype} holds {low} to {high}")
    return ir.Const(value, dtype, current_loc())


def as_expr(value) -> ir.Expr:
    return value if is_expr(value) else const(value)


def cast(value, dtype: T.DType):
    """Convert to `dtype`; constants are converted right away, no-op casts vanish."""
    if not is_expr(value):
        return const(value, dtype)
    if value.dtype == dtype:
        return value
    if isinstance(value, ir.Const):   # converted now, as the run-time cast would (ints wrap)
        converted = np.array(value.value).astype(dtype.np).item()
        return ir.Const(converted, dtype, value.loc)
    return ir.Op("cast", (value,), dtype, current_loc())


def _fold(spec, values):
    result = spec.eval(*values)
    return result.item() if isinstance(result, np.generic) else result


def _result_dtype(spec, dtypes):
    kind = spec.kind
    if kind in ("compare", "logic"):
        return None, T.i32
    common = dtypes[0]
    for d in dtypes[1:]:
        common = T.promote(common, d)
    if kind == "float" and common.is_int:
        common = T.typing_defaults().fp
    if kind == "int" and common.is_float:
        raise TinyadTypeError(f"`{spec.infix or spec.name}` needs integer operands, got "
                              f"{', '.join(map(str, dtypes))}", current_loc(),
                              hint="convert with ti.cast(v, ti.i32) or int(v) first")
    return common, common


def apply(name: str, *args):
    """Apply op `name` to arguments, promoting their types as Taichi does."""
    # The core's one import circle (tests/test_layers.py CIRCLES): the op table's derivative
    # rules build IR with this module, which types each op by its row there
    from tinyad.core.ops import TABLE  # noqa: PLC0415
    spec = TABLE[name]
    if not any(is_expr(a) for a in args):
        return _fold(spec, args)
    exprs = [as_expr(a) for a in args]
    operand_dtype, result = _result_dtype(spec, [e.dtype for e in exprs])
    if name == "pow" and not result.is_float and isinstance(exprs[1], ir.Const) and \
            exprs[1].value < 0:
        raise TinyadTypeError(f"an integer to the power {exprs[1].value} is not an integer "
                              "(Taichi refuses a negative exponent in pow(int, int))",
                              current_loc(), hint="make the base a float: float(x) ** y")
    if operand_dtype is not None:
        exprs = [cast(e, operand_dtype) for e in exprs]
    if all(isinstance(e, ir.Const) for e in exprs):
        # in the operands' own type, so ints wrap as the run-time operation would wrap them
        typed = [np.array(e.value, dtype=e.dtype.np)[()] for e in exprs]
        with np.errstate(over="ignore"):
            folded = _fold(spec, typed)
        if not result.is_float:
            folded = np.array(folded).astype(result.np).item()
        return const(folded, result)
    simplified = _simplify(name, exprs)
    if simplified is not None:
        return simplified
    return ir.Op(name, tuple(exprs), result, current_loc())


def _is_const(e, value) -> bool:
    return isinstance(e, ir.Const) and e.value == value


def _simplify(name, exprs):
    """Identities that keep generated adjoint code readable (x*1, x+0, 0-x)."""
    if name == "mul":
        a, b = exprs
        if _is_const(a, 1):
            return b
        if _is_const(b, 1):
            return a
        if _is_const(a, -1):
            return apply("neg", b)
        if _is_const(b, -1):
            return apply("neg", a)
    if name == "add":
        a, b = exprs
        if _is_const(a, 0):
            return b
        if _is_const(b, 0):
            return a
    if name == "sub" and _is_const(exprs[1], 0):
        return exprs[0]
    if name == "neg" and isinstance(exprs[0], ir.Op) and exprs[0].op == "neg":
        return exprs[0].args[0]
    return None


def unary(name: str, a):
    return apply(name, a)


def binary(name: str, a, b):
    return apply(name, a, b)


def select(cond, a, b):
    """`a if cond else b` without branching; decided now when `cond` is a Python value."""
    if not is_expr(cond):
        return a if cond else b
    a, b = as_expr(a), as_expr(b)
    common = T.promote(a.dtype, b.dtype)
    return ir.Op("select", (cond, cast(a, common), cast(b, common)), common, current_loc())


def random(dtype: T.DType) -> ir.Op:
    return ir.Op("random", (), dtype, current_loc())
