"""The op table: for every scalar operation, its typing kind, how to print it, how to evaluate it
(numbers and sympy symbols), and its derivative, side by side.

A derivative rule returns each argument's partial derivative as IR: `partials(args, out)` gives
d(out)/d(arg_k) for each k, or None where the partial is zero. Reverse mode multiplies by the
output adjoint (arg_bar += g * partial); forward mode sums partial * arg_dot. One rule, both modes.
An op with `partials=None` is not differentiable (floor, comparisons, ...): no gradient flows
through it, as in Taichi.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from tinyad.core import builder as B

# Typing kinds (applied in tinyad/build.py):
#   arith   operands promoted to one type, result of that type
#   float   like arith, but an integer operand first becomes default_fp (sin(1) is a float)
#   compare operands promoted, result i32 (0 or 1)
#   int     integer operands only (bit operations), result promoted
#   logic   operands are truth values, result i32
#   select  select(cond, a, b): a and b promoted, cond any type
#   cast    result type named by the node
#   random  no operands, float result


@dataclass(frozen=True)
class OpSpec:
    name: str
    arity: int
    kind: str
    eval: Callable
    sym: Callable | None = None          # the same op on sympy expressions (imported lazily)
    partials: Callable | None = None     # (args, out) -> tuple of partial derivatives (IR)
    infix: str | None = None             # printed as `a + b` rather than `add(a, b)`


def _sp():
    import sympy  # noqa: PLC0415  (sympy is only imported when symbolic checks run)
    return sympy


def _nonzero(x):
    return x != 0


def _logical_not(a):
    return np.int32(not a)


def _select(c, a, b):
    return a if c else b


def _sym_select(c, a, b):
    sp = _sp()
    cond = c if isinstance(c, sp.logic.boolalg.Boolean) else sp.Ne(c, 0)
    return sp.Piecewise((a, cond), (b, True))


def _sym_compare(fn):
    return lambda a, b: fn(_sp())(a, b)


def _round_half_even(a):
    return np.round(a)


_TABLE: list[OpSpec] = [
    # arithmetic
    OpSpec("add", 2, "arith", np.add, lambda a, b: a + b, lambda a, o: (1, 1), "+"),
    OpSpec("sub", 2, "arith", np.subtract, lambda a, b: a - b, lambda a, o: (1, -1), "-"),
    OpSpec("mul", 2, "arith", np.multiply, lambda a, b: a * b, lambda a, o: (a[1], a[0]), "*"),
    OpSpec("truediv", 2, "float", np.true_divide, lambda a, b: a / b,
           lambda a, o: (1 / a[1], -o / a[1]), "/"),
    OpSpec("floordiv", 2, "arith", np.floor_divide, lambda a, b: _sp().floor(a / b), None, "//"),
    OpSpec("mod", 2, "arith", np.mod, lambda a, b: _sp().Mod(a, b), None, "%"),
    OpSpec("pow", 2, "arith", np.power, lambda a, b: a ** b,
           lambda a, o: (a[1] * a[0] ** (a[1] - 1), B.unary("log", a[0]) * o), "**"),
    OpSpec("neg", 1, "arith", np.negative, lambda a: -a, lambda a, o: (-1,)),
    OpSpec("abs", 1, "arith", np.abs, lambda a: _sp().Abs(a),
           lambda a, o: (B.select(a[0] >= 0, 1.0, -1.0),)),
    OpSpec("min", 2, "arith", np.minimum, lambda a, b: _sp().Min(a, b),
           lambda a, o: (B.select(a[0] <= a[1], 1.0, 0.0), B.select(a[0] <= a[1], 0.0, 1.0))),
    OpSpec("max", 2, "arith", np.maximum, lambda a, b: _sp().Max(a, b),
           lambda a, o: (B.select(a[0] >= a[1], 1.0, 0.0), B.select(a[0] >= a[1], 0.0, 1.0))),
    # transcendental
    OpSpec("sin", 1, "float", np.sin, lambda a: _sp().sin(a),
           lambda a, o: (B.unary("cos", a[0]),)),
    OpSpec("cos", 1, "float", np.cos, lambda a: _sp().cos(a),
           lambda a, o: (-B.unary("sin", a[0]),)),
    OpSpec("tan", 1, "float", np.tan, lambda a: _sp().tan(a), lambda a, o: (1 + o * o,)),
    OpSpec("asin", 1, "float", np.arcsin, lambda a: _sp().asin(a),
           lambda a, o: (B.unary("rsqrt", 1 - a[0] * a[0]),)),
    OpSpec("acos", 1, "float", np.arccos, lambda a: _sp().acos(a),
           lambda a, o: (-B.unary("rsqrt", 1 - a[0] * a[0]),)),
    OpSpec("atan", 1, "float", np.arctan, lambda a: _sp().atan(a),
           lambda a, o: (1 / (1 + a[0] * a[0]),)),
    OpSpec("atan2", 2, "float", np.arctan2, lambda a, b: _sp().atan2(a, b),
           lambda a, o: (a[1] / (a[0] * a[0] + a[1] * a[1]),
                         -a[0] / (a[0] * a[0] + a[1] * a[1]))),
    OpSpec("tanh", 1, "float", np.tanh, lambda a: _sp().tanh(a), lambda a, o: (1 - o * o,)),
    OpSpec("exp", 1, "float", np.exp, lambda a: _sp().exp(a), lambda a, o: (o,)),
    OpSpec("log", 1, "float", np.log, lambda a: _sp().log(a), lambda a, o: (1 / a[0],)),
    OpSpec("sqrt", 1, "float", np.sqrt, lambda a: _sp().sqrt(a), lambda a, o: (0.5 / o,)),
    OpSpec("rsqrt", 1, "float", lambda a: 1 / np.sqrt(a), lambda a: 1 / _sp().sqrt(a),
           lambda a, o: (-0.5 * o * o * o,)),
    # not differentiable: no gradient flows through these (as in Taichi)
    OpSpec("floor", 1, "arith", np.floor, lambda a: _sp().floor(a)),
    OpSpec("ceil", 1, "arith", np.ceil, lambda a: _sp().ceiling(a)),
    OpSpec("round", 1, "arith", _round_half_even, lambda a: _sp().Integer(round(a))),
    OpSpec("lt", 2, "compare", np.less, _sym_compare(lambda sp: sp.Lt), None, "<"),
    OpSpec("le", 2, "compare", np.less_equal, _sym_compare(lambda sp: sp.Le), None, "<="),
    OpSpec("gt", 2, "compare", np.greater, _sym_compare(lambda sp: sp.Gt), None, ">"),
    OpSpec("ge", 2, "compare", np.greater_equal, _sym_compare(lambda sp: sp.Ge), None, ">="),
    OpSpec("eq", 2, "compare", np.equal, _sym_compare(lambda sp: sp.Eq), None, "=="),
    OpSpec("ne", 2, "compare", np.not_equal, _sym_compare(lambda sp: sp.Ne), None, "!="),
    OpSpec("and", 2, "logic", lambda a, b: np.int32(bool(a) and bool(b)),
           lambda a, b: _sp().And(a, b), None, "and"),
    OpSpec("or", 2, "logic", lambda a, b: np.int32(bool(a) or bool(b)),
           lambda a, b: _sp().Or(a, b), None, "or"),
    OpSpec("not", 1, "logic", _logical_not, lambda a: _sp().Not(a)),
    OpSpec("bit_and", 2, "int", np.bitwise_and, None, None, "&"),
    OpSpec("bit_or", 2, "int", np.bitwise_or, None, None, "|"),
    OpSpec("bit_xor", 2, "int", np.bitwise_xor, None, None, "^"),
    OpSpec("shl", 2, "int", np.left_shift, None, None, "<<"),
    OpSpec("shr", 2, "int", np.right_shift, None, None, ">>"),
    OpSpec("bit_not", 1, "int", np.invert),
    # structure
    OpSpec("select", 3, "select", _select, _sym_select,
           lambda a, o: (None, B.select(a[0], 1.0, 0.0), B.select(a[0], 0.0, 1.0))),
    OpSpec("cast", 1, "cast", None, lambda a: a, lambda a, o: (1,)),  # float<->float only
    OpSpec("stop_grad", 1, "arith", lambda a: a, lambda a: a),  # identity that blocks gradients
    OpSpec("random", 0, "random", None),
]

TABLE: dict[str, OpSpec] = {spec.name: spec for spec in _TABLE}



def cast_keeps_gradient(to, source) -> bool:
    """`ti.cast` between float types passes the gradient; to or from an integer type stops it."""
    return to.is_float and source.is_float
