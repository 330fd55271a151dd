"""The sympy pieces the symbolic domain (interp/symbolic.py) builds formulas from, and the
budget that keeps sympy from running away.

Why own versions of floor, ceiling and Piecewise: sympy leaves the derivative of floor
unevaluated (the kernels' gradients take it as 0), and its Piecewise re-simplifies its
conditions every time one is built, which takes seconds once conditions nest. `standard()`
turns a formula back into plain sympy for users.
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time

import numpy as np
import sympy as sp
from sympy.functions.elementary.piecewise import ExprCondPair

from tinyad.core.errors import TinyadError


def fold(expr, memo: dict, leaf, node):
    """Fold a sympy tree bottom-up: memo[atom] = leaf(atom), memo[e] = node(e, [memo[arg] ...]).
    Each distinct subexpression is visited once (shared subtrees are common in the formulas of
    a program), and the walk is iterative, so deep formulas do not hit the recursion limit."""
    stack = [expr]
    while stack:
        e = stack[-1]
        if e in memo:
            stack.pop()
            continue
        if not e.args:
            memo[e] = leaf(e)
            stack.pop()
            continue
        pending = [a for a in e.args if a not in memo]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        memo[e] = node(e, [memo[a] for a in e.args])
    return memo[expr]


class SymbolicUnsupported(TinyadError):
    """The kernel does something that has no formula (random numbers, an index that depends on
    the parameters, a loop whose exit depends on them)."""


class SymbolicBudgetExceeded(TinyadError):
    """The formula grew past the size or time budget given to the symbolic run."""


class floor(sp.floor):  # noqa: N801  (printed by its class name: `floor(x)`)
    """sympy's floor leaves its derivative unevaluated; the kernels' gradients treat it as 0."""

    def fdiff(self, argindex=1):
        return sp.S.Zero


class ceiling(sp.ceiling):  # noqa: N801
    def fdiff(self, argindex=1):
        return sp.S.Zero


class Piecewise(sp.Piecewise):
    """sympy's Piecewise without its simplification: sympy folds and simplifies the conditions
    every time one is built (and diff and xreplace rebuild them), which takes seconds once
    conditions nest, as they do when a branch in a loop tests a value an earlier branch made.
    This one only drops false conditions, stops at a true one, and collapses equal branches."""

    def __new__(cls, *args, **options):
        pairs = []
        for pair in args:
            expr, cond = getattr(pair, "args", pair)
            cond = sp.true if cond is True else sp.false if cond is False else cond
            if cond == sp.false:
                continue
            pairs.append(sp.Tuple.__new__(ExprCondPair, sp.sympify(expr), cond))
            if cond == sp.true:
                break
        if not pairs:
            return sp.nan
        if pairs[0].cond == sp.true or all(p.expr == pairs[0].expr for p in pairs[1:]):
            return pairs[0].expr
        return sp.Basic.__new__(cls, *pairs)


class stop_grad(sp.Function):  # noqa: N801
    """Only for showing formulas: `stop_grad(x_0**2)` where the program blocked the gradient."""


def standard(expr):
    """`expr` with this module's Piecewise, floor and ceiling replaced by sympy's own, for
    handing formulas to users (they compare equal to what they build with sympy)."""
    own = {Piecewise: lambda *a: sp.Piecewise(*a, evaluate=False),
           floor: sp.floor, ceiling: sp.ceiling}
    return expr.replace(lambda e: type(e) in own, lambda e: own[type(e)](*e.args))


def number(value):
    """A Python or numpy number as a sympy number. Integral floats become Integers and short
    decimals Rationals, so formulas read `2*x_0` and `x_0/10` rather than `2.0*x_0`."""
    if isinstance(value, sp.Basic):
        return value
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return sp.Integer(int(value))
    value = float(value)
    if not np.isfinite(value):
        return sp.nan if np.isnan(value) else (sp.oo if value > 0 else -sp.oo)
    if value.is_integer():
        return sp.Integer(int(value))
    text = repr(value)
    if "e" not in text and len(text.lstrip("-")) <= 8:
        return sp.Rational(text)
    return sp.Float(value)


class Budget:
    """Stops a symbolic run that takes too long, evaluates too many operations, or builds a
    value whose expression tree is too big (branches on symbolic conditions can make formulas
    grow exponentially with the number of loop iterations; sympy then crawls)."""

    def __init__(self, max_ops=200_000, seconds=20.0, max_size=20_000):
        self.max_ops, self.seconds, self.max_size = max_ops, seconds, max_size
        self.ops = 0
        self.deadline = time.perf_counter() + seconds
        self.sizes: dict = {}   # expression -> its tree size (shared subtrees counted each time)

    def measure(self, expr):
        """Raise if `expr`'s tree is bigger than max_size. Memoised, so each new node is
        visited once, and iterative, so deep trees do not hit the recursion limit."""
        if not isinstance(expr, sp.Basic) or not expr.args:
            return
        size = fold(expr, self.sizes, lambda atom: 1, lambda e, sizes: 1 + sum(sizes))
        if size > self.max_size:
            raise SymbolicBudgetExceeded(f"the formula grew past {self.max_size} terms")

    def tick(self):
        self.ops += 1
        if self.ops > self.max_ops:
            raise SymbolicBudgetExceeded(f"the formula needs more than {self.max_ops} symbolic "
                                         "operations")
        if self.ops % 512 == 0:
            self.check_time()

    def check_time(self):
        if time.perf_counter() > self.deadline:
            raise SymbolicBudgetExceeded(f"sympy took longer than {self.seconds:g} s")


@contextlib.contextmanager
def limits(seconds: float):
    """Interrupt sympy after `seconds` (a single sympy call on a big formula can run for
    minutes, so checking the clock between operations is not enough), and report a formula
    nested too deeply for sympy's recursion as over budget too. The interruption uses SIGALRM,
    so only in the main thread on Unix; elsewhere the Budget's clock checks are all there is."""
    usable = (hasattr(signal, "setitimer") and
              threading.current_thread() is threading.main_thread())

    def expire(signum, frame):
        raise SymbolicBudgetExceeded(f"sympy took longer than {seconds:.3g} s")
    if usable:
        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield
    except RecursionError:
        raise SymbolicBudgetExceeded("the formula is nested too deeply for sympy") from None
    finally:
        if usable:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
