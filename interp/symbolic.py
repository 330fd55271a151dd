"""The symbolic value domain: the interpreter runs a kernel on sympy expressions.

Why: the true gradient of a program is the derivative of the formula it computes. Walking the
very same IR (interp/evaluator.py) with sympy values instead of numbers gives that formula with
no second copy of the language's semantics to keep in sync; sympy then differentiates it.

What a value is here:
  - floats are exact sympy numbers or expressions in the parameter symbols (real-valued);
  - comparisons are sympy Booleans; a Boolean used as a number becomes Piecewise((1, b), (0, True));
  - an integer that depends on the parameters is wrapped in `SymbolicInt`, so that using it as an
    index or a loop bound stops with a clear error (indices and bounds must be concrete);
  - `if` on a symbolic condition runs both branches, on copies of the locals and with the memory
    writes undone in between, and merges what differs with Piecewise; a concrete one just picks;
  - `select` is Piecewise, `min`/`max` are Min/Max, `floor`/`ceil`/`//`/`%` use versions whose
    derivative sympy knows (floor' = 0, as the kernels' own gradients assume);
  - `ti.stop_grad(v)` becomes a fresh symbol standing for v, so differentiation treats it as a
    constant; `SymbolicDomain.stopped` keeps (symbol, expression) to put the value back.

This module imports sympy at the top on purpose: only gradient verification imports it.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from tinyad.core import ir
from tinyad.core.ops import TABLE
from tinyad.interp.evaluator import _Break
from tinyad.interp.memory import Memory
from tinyad.interp.symparts import Budget, Piecewise, SymbolicUnsupported, ceiling, floor, number


class SymbolicInt:
    """An integer value that depends on the parameters. Arithmetic unwraps it; `int()` on it
    (what the interpreter does to indices and loop bounds) raises a clear error instead."""
    __slots__ = ("expr", "loc")

    def __init__(self, expr, loc=None):
        self.expr, self.loc = expr, loc

    def __int__(self):
        raise SymbolicUnsupported(
            f"an index or loop bound depends on the parameters ({self.expr}): symbolic "
            "verification needs concrete integer indices", self.loc,
            hint="use method='fd' (finite differences) for this program")

    __index__ = __int__

    def __repr__(self):
        return f"SymbolicInt({self.expr})"


def plain(value):
    """The sympy value inside a SymbolicInt (or the value itself)."""
    return value.expr if isinstance(value, SymbolicInt) else value


def is_concrete(value) -> bool:
    value = plain(value)
    if isinstance(value, sp.Basic):
        return value.is_Number or value in (sp.true, sp.false)
    return True


def is_boolean(value) -> bool:
    """A sympy truth value (a Symbol is a Boolean to sympy too, hence the Expr test)."""
    return isinstance(value, sp.logic.boolalg.Boolean) and not isinstance(value, sp.Expr)


def as_bool(value):
    """A value as a sympy Boolean (nonzero is true), for conditions."""
    value = plain(value)
    if is_boolean(value):
        return value
    value = number(value)
    if value.is_Number:
        return sp.true if value != 0 else sp.false
    return sp.Ne(value, 0)


def as_number(value):
    """A value as a sympy arithmetic expression (a Boolean becomes 1 or 0)."""
    value = plain(value)
    if is_boolean(value):
        if value in (sp.true, sp.false):
            return sp.Integer(1 if value == sp.true else 0)
        return Piecewise((sp.Integer(1), value), (sp.Integer(0), True))
    return number(value)


def merge(cond, then, orelse, before=None):
    """The value after an `if` on a symbolic condition. When both branches only added terms to
    the value before (`loss += ...`), only the added terms go under the Piecewise: formulas
    stay linear in the number of branches instead of nesting the whole sum in each one."""
    a, b = plain(then), plain(orelse)
    if a is b or a == b:
        return then
    both_int = all(isinstance(v, SymbolicInt) or (isinstance(plain(v), sp.Basic) and
                                                   plain(v).is_Integer) for v in (then, orelse))
    a, b = as_number(a), as_number(b)
    base = _common_terms(plain(before), a, b) if before is not None else sp.S.Zero
    merged = base + Piecewise((a - base, cond), (b - base, True))
    return SymbolicInt(merged) if both_int else merged


def _common_terms(before, a, b):
    """`before` if it is a symbolic sum whose every term is also a term of a and of b."""
    if isinstance(before, sp.logic.boolalg.Boolean) and not isinstance(before, sp.Expr):
        return sp.S.Zero
    before = number(before)
    if before.is_Number:
        return sp.S.Zero
    terms = set(sp.Add.make_args(before))
    if terms <= set(sp.Add.make_args(a)) and terms <= set(sp.Add.make_args(b)):
        return before
    return sp.S.Zero


def _truncate(a):
    """float -> int conversion (toward zero), as a cast does."""
    if a.is_Number:
        return sp.Integer(int(a))
    return Piecewise((floor(a), a >= 0), (ceiling(a), True))


class SymbolicDomain:
    """The interpreter's value domain for sympy (same methods as interp.domain.NumericDomain)."""

    def __init__(self, budget: Budget | None = None):
        self.budget = budget or Budget()
        self.stopped: list = []   # (symbol, expression) for every stop_grad met, in order

    def const(self, e: ir.Const):
        value = number(e.value)
        return lambda fr: value

    def argument(self, arg: ir.Arg, value):
        return number(value)

    def result(self, value):
        return plain(value)

    def truth(self, value) -> bool:
        cond = as_bool(value)
        if cond in (sp.true, sp.false):
            return cond == sp.true
        raise SymbolicUnsupported(f"a while-loop condition depends on the parameters ({cond})",
                                  hint="use method='fd' (finite differences) for this program")

    # ---- operations ----------------------------------------------------------------------
    def op(self, e: ir.Op, args):
        fn = self._function(e)
        budget, loc = self.budget, e.loc
        wrap = e.dtype.is_int and TABLE[e.op].kind not in ("compare", "logic")

        def run(fr):
            budget.tick()
            value = fn(*[a(fr) for a in args])
            budget.measure(plain(value))
            if wrap and not is_concrete(value):
                return SymbolicInt(plain(value), loc)
            return value
        return run

    def _function(self, e: ir.Op):
        """The op on sympy values: a rule of this domain where sympy needs help (_RULES: forms
        that depend on the node, integers, functions whose derivative sympy leaves unevaluated),
        else the op table's `sym` on numbers (or on truth values, for and/or/not)."""
        name, spec = e.op, TABLE[e.op]
        if name in _RULES:
            return _RULES[name](self, e)
        if spec.kind == "int":   # bit operations: fine on concrete integers only
            return _concrete_only(e.op, e.loc)
        if spec.sym is None:
            raise SymbolicUnsupported(f"`{name}` has no sympy form: give it one in the op "
                                      "table (tinyad/core/ops.py)", e.loc)
        convert = as_bool if spec.kind == "logic" else as_number
        return lambda *values: spec.sym(*[convert(v) for v in values])

    def _stop_grad(self, value):
        value = plain(value)
        if is_concrete(value):
            return value
        symbol = sp.Dummy(f"sg{len(self.stopped)}", real=True)
        self.stopped.append((symbol, as_number(value)))
        return symbol

    # ---- control flow --------------------------------------------------------------------
    def branch(self, cond, then, orelse):
        def run(fr):
            c = cond(fr)
            if is_concrete(c):
                (then if as_bool(c) == sp.true else orelse)(fr)
            else:
                self._both(fr, as_bool(c), then, orelse)
        return run

    def _both(self, fr, cond, then, orelse):
        """Run both branches from the same state, then merge locals and memory with Piecewise.
        Locals are updated in place: enclosing loops hold a reference to the same dict."""
        mem, env = fr.mem, fr.env
        before = dict(env)
        results = []
        for block in (then, orelse):
            env.clear()
            env.update(before)
            mem.begin_branch()
            try:
                block(fr)
            except _Break:
                raise SymbolicUnsupported(
                    f"a `break` depends on the parameters ({cond})",
                    hint="use method='fd' (finite differences) for this program") from None
            results.append((dict(env), mem.end_branch()))
        (env_t, (new_t, old_t)), (env_f, (new_f, old_f)) = results
        env.clear()
        for name in env_t.keys() | env_f.keys():
            if name in env_t and name in env_f:
                env[name] = merge(cond, env_t[name], env_f[name], before.get(name))
                self.budget.measure(plain(env[name]))
            else:
                env[name] = env_t[name] if name in env_t else env_f[name]
        old = {**old_f, **old_t}
        for key in new_t.keys() | new_f.keys():
            value = merge(cond, new_t.get(key, old[key]), new_f.get(key, old[key]), old[key])
            self.budget.measure(plain(value))
            mem.put(key, value)


def _select(domain, e):
    return lambda c, a, b: merge(as_bool(c), a, b) if not is_concrete(c) else (
        a if as_bool(c) == sp.true else b)


def _cast(domain, e):
    if e.dtype.is_int and e.args[0].dtype.is_float:
        return lambda a: _truncate(as_number(a))
    return lambda a: a if e.dtype.is_int else as_number(a)


def _round(domain, e):
    def half_to_even(a):
        a = as_number(a)
        return number(np.round(float(a))) if a.is_Number else floor(a + sp.Rational(1, 2))
    return half_to_even


def _no_random(domain, e):
    def no_random():
        raise SymbolicUnsupported("ti.random() has no formula", e.loc,
                                  hint="use method='fd' (finite differences)")
    return no_random


def _concrete_only(op: str, loc, what: str | None = None):
    """Op `op` (a bit operation, or a bitwise atomic, `what` it is called) on concrete
    integers only: a value that depends on the parameters has no formula."""
    spec = TABLE[op]

    def compute(*values):
        values = [as_number(v) for v in values]
        if not all(v.is_Integer for v in values):
            raise SymbolicUnsupported(f"{what or op} of a value that depends on the parameters "
                                      "has no formula", loc)
        return number(spec.eval(*[np.int64(int(v)) for v in values]))
    return compute


# Ops whose sympy form is this domain's own, by name: (domain, node) -> function on values.
# floor and ceiling are symparts' versions, whose derivative is 0 (as the kernels assume).
_RULES = {
    "select": _select,
    "cast": _cast,
    "stop_grad": lambda domain, e: domain._stop_grad,
    "floor": lambda domain, e: lambda a: floor(as_number(a)),
    "ceil": lambda domain, e: lambda a: ceiling(as_number(a)),
    "round": _round,
    "floordiv": lambda domain, e: lambda a, b: floor(as_number(a) / as_number(b)),
    "mod": lambda domain, e: lambda a, b: (as_number(a) - as_number(b)
                                           * floor(as_number(a) / as_number(b))),
    "random": _no_random,
}


class SymbolicMemory(Memory):
    """Memory for the symbolic domain: a private object array of sympy values per field, made
    on first access from the field's current numbers (or from `seeds`, e.g. symbols). The real
    fields are never written."""

    def __init__(self, seeds: dict | None = None, values: dict | None = None):
        self.seeds = {id(f): (f, a) for f, a in (seeds or {}).items()}
        self.values = {id(f): a for f, a in (values or {}).items()}  # numbers to start from
        self.arrays: dict[int, np.ndarray] = {}
        self.fields: dict[int, object] = {}
        self._logs: list[dict] = []   # per open branch: key -> value before its first write

    def array(self, field) -> np.ndarray:
        key = id(field)
        if key not in self.arrays:
            if key in self.seeds:
                array = np.array(self.seeds[key][1], dtype=object)
            else:
                source = self.values.get(key, field.data)
                array = np.empty(source.shape, dtype=object)
                for index in np.ndindex(source.shape):
                    array[index] = number(source[index])
            self.arrays[key], self.fields[key] = array, field
        return self.arrays[key]

    def store(self, field, index, value, site):
        Memory.load(self, field, index, site)   # checks the index, makes the array
        self.put((id(field), index), value)

    def atomic(self, op, field, index, value, site):
        old = Memory.load(self, field, index, site)
        a, b = as_number(old), as_number(value)
        if op in ir.BITWISE_ATOMICS:     # on concrete integers only, as the bit ops
            new = _concrete_only(op, site.loc, f"atomic {op}")(a, b)
        else:
            new = {"add": lambda: a + b, "sub": lambda: a - b,
                   "min": lambda: sp.Min(a, b), "max": lambda: sp.Max(a, b)}[op]()
        if isinstance(old, SymbolicInt) or isinstance(value, SymbolicInt):
            new = SymbolicInt(new, site.loc)
        self.put((id(field), index), new)
        return old

    # ---- writes that a symbolic branch can undo --------------------------------------------
    def put(self, key, value):
        fid, index = key
        array = self.arrays[fid]
        if self._logs and key not in self._logs[-1]:
            self._logs[-1][key] = array[index]
        array[index] = value

    def begin_branch(self):
        self._logs.append({})

    def end_branch(self):
        """Undo the branch's writes; returns ({key: value written}, {key: value before})."""
        log = self._logs.pop()
        written = {}
        for (fid, index), before in log.items():
            written[(fid, index)] = self.arrays[fid][index]
            self.arrays[fid][index] = before
        return written, log

    def value(self, field, index=()):
        """The current (plain sympy) value of one element."""
        return plain(self.array(field)[index])
