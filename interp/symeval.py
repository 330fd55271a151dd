"""Numbers out of sympy formulas, fast: the f64 value of a formula at a point.

Why not sympy's `expr.xreplace(point).evalf()`: it walks the formula as a tree (a subexpression
shared a thousand times is evaluated a thousand times), re-runs sympy's automatic
simplifications on every rebuilt node, and evaluates with adaptive precision. For the formulas
of a loop-carried computation that takes seconds per derivative; this takes milliseconds.
"""
from __future__ import annotations

import numpy as np
import sympy as sp
from sympy.functions.elementary.piecewise import ExprCondPair

from tinyad.core.ops import TABLE
from tinyad.interp.symparts import fold


def _table_functions() -> dict:
    """sympy function -> numpy function for the op table's one-argument functions (sp.sin ->
    np.sin), so a new row with a sympy function evaluates fast with no entry here."""
    x = sp.Symbol("x")
    found = {}
    for spec in TABLE.values():
        if spec.arity == 1 and spec.sym is not None and spec.kind in ("arith", "float"):
            form = spec.sym(x)
            if isinstance(form, sp.Function) and form.args == (x,):
                found[type(form)] = spec.eval
    return found


# ...and the functions that only derivatives and simplification bring in.
_UNARY = {**_table_functions(), sp.sinh: np.sinh, sp.cosh: np.cosh, sp.sign: np.sign,
          sp.floor: np.floor, sp.ceiling: np.ceil, sp.sec: lambda v: 1 / np.cos(v),
          sp.csc: lambda v: 1 / np.sin(v), sp.cot: lambda v: 1 / np.tan(v)}
_RELATIONS = {sp.StrictLessThan: np.less, sp.LessThan: np.less_equal,
              sp.StrictGreaterThan: np.greater, sp.GreaterThan: np.greater_equal,
              sp.Equality: np.equal, sp.Unequality: np.not_equal}


def _heaviside(x, h0=0.5):
    return 0.0 if x < 0 else 1.0 if x > 0 else (0.5 if np.isnan(h0) else h0)


def _apply(e, args):
    """One node of a formula, on the float values of its arguments."""
    if e.is_Add:
        return np.float64(sum(args))
    if e.is_Mul:
        return np.prod(args, dtype=np.float64)
    if e.is_Pow:
        return np.power(np.float64(args[0]), np.float64(args[1]))
    if isinstance(e, ExprCondPair):
        return tuple(args)
    if isinstance(e, sp.Piecewise):
        return next((value for value, cond in args if cond), np.nan)
    func = type(e)
    for known, fn in _UNARY.items():
        if issubclass(func, known):
            return fn(np.float64(args[0]))
    for known, fn in _RELATIONS.items():
        if issubclass(func, known):
            return bool(fn(args[0], args[1]))
    if isinstance(e, sp.Min):
        return np.float64(min(args))
    if isinstance(e, sp.Max):
        return np.float64(max(args))
    if isinstance(e, sp.And):
        return all(args)
    if isinstance(e, sp.Or):
        return any(args)
    if isinstance(e, sp.Not):
        return not args[0]
    if isinstance(e, sp.Heaviside):
        return _heaviside(*args)
    if isinstance(e, sp.atan2):
        return np.arctan2(np.float64(args[0]), np.float64(args[1]))
    rebuilt = e.func(*[sp.Float(float(a)) for a in args])   # anything else: ask sympy
    return _atom(rebuilt.evalf(), {})


def _atom(e, values):
    if e in values:
        return values[e]
    if e in (sp.true, sp.false):
        return e == sp.true
    try:
        return np.float64(complex(e).real if complex(e).imag == 0 else np.nan)
    except (TypeError, ValueError):
        return np.float64(np.nan)


def evaluate(expr, values: dict, memo: dict | None = None) -> float:
    """A formula's value in f64 with `values` for its symbols. Each distinct subexpression is
    computed once (pass the same `memo` for many formulas at one point: the derivatives of a
    loss share most of their subexpressions); sympy's own xreplace+evalf does neither, and it
    takes seconds where this takes milliseconds. Iterative, so deep formulas are fine."""
    memo = {} if memo is None else memo
    with np.errstate(all="ignore"):
        return float(fold(expr, memo, lambda atom: _atom(atom, values), _apply))
