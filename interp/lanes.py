"""Vectorised lanes: a parallel loop's iterations run together, one numpy operation per IR
statement over all of them.

Why: the tree-walking evaluator (interp/evaluator.py) costs ~18 µs per element and statement;
a numpy operation over 10⁴ lanes costs about as much as one element does. The scalar evaluator
stays the reference: a loop this module cannot run (see `Unsupported`) runs there, and
tests/test_lanes.py runs kernels both ways and compares.

How a loop body runs here:
  * a value is a numpy scalar (the same for every lane: a kernel argument, a constant) or an
    array with one entry per lane; ops broadcast, and each result takes the node's dtype (an f32
    op the op table marks `via_f64` is computed in f64 and rounded once, as the scalar path does);
  * `if` runs both sides, each under a mask of its lanes (a side with no lane is skipped);
    `select` evaluates each operand under its lanes' mask only, so a load on the side not taken
    is not made (it may be out of bounds, as in `select(i > 0, x[i - 1], 0.0)`);
  * an inner serial loop runs as a Python loop; bounds that differ between lanes run from the
    lowest start to the highest stop, each lane active inside its own bounds;
  * loads, stores and atomics go to a lane memory (`PlainLanes`; a custom gradient check's,
    tinyad/customcheck.py) as index arrays of the active lanes: loads by fancy indexing, stores by
    assignment (the last lane wins, as the last iteration does in the scalar path), atomics by
    `np.add.at` & co, which apply lane after lane in order.
What is left to the scalar path: `while`, `break`, `return` in the loop, atomics whose old value
is used, `ti.random()` (its draws must come in the scalar order).
"""
from __future__ import annotations

import os

import numpy as np

from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import assertion_failed, division_by_zero, negative_int_power, out_of_bounds
from tinyad.core.ops import TABLE
from tinyad.interp.lanestack import LaneStack
from tinyad.interp.memory import ATOMIC_UFUNCS, Memory

# At most this many lanes at once (a longer loop runs in chunks, one after another): bounds the
# memory a statement's temporaries take.
CHUNK = 1 << 16
# TINYAD_INTERP_LANES=0 runs every loop on the scalar path (the reference), for comparisons.
ENV_SWITCH = "TINYAD_INTERP_LANES"


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


class Unsupported(Exception):
    """The loop uses something lanes do not run: the scalar evaluator runs it."""


class LaneRun:
    """The state of one chunk of lanes: locals (scalars or per-lane arrays), the lanes' loop
    indices, the lane memory, Save/Restore stacks."""
    __slots__ = ("env", "n", "iters", "mem", "stacks")

    def __init__(self, env, iters, mem):
        self.env, self.iters, self.mem, self.n, self.stacks = env, iters, mem, len(iters), {}


def _full(value, n):
    return value if isinstance(value, np.ndarray) and value.shape == (n,) else \
        np.broadcast_to(value, (n,))


def _merge(mask, new, old, n):
    """Per lane: `new` where the lane is active, `old` elsewhere."""
    if mask is None or old is None:
        return new
    return np.where(mask, new, old)


class PlainLanes:
    """Lane access to plain memory: bounds-checked fancy indexing."""

    def __init__(self, memory):
        self.memory = memory

    def locate(self, fld, idx, n, site):
        """-> (array, where, flat): `array[where]` are the n active lanes' elements, `flat`
        their flat indices, every index checked in bounds (one ravel_multi_index, in C).
        `array` is a 1-d view and `where` the flat indices, except for a strided array
        (kernels refuse strided numpy arrays today; a reshape would copy one and lose the
        stores): there the array itself and the index tuple."""
        data = self.memory.array(fld)
        if not idx:     # a 0-d field: every lane has its one element
            flat = np.zeros(n, np.intp)
            return data.reshape(1), flat, flat
        try:
            flat = np.ravel_multi_index(idx, data.shape)
        except ValueError:
            self.checked(fld, idx, site)      # raises the bounds error for the first bad lane
            raise
        if data.flags.c_contiguous:
            return data.reshape(-1), flat, flat
        return data, idx, flat

    def checked(self, fld, idx, site):
        """`idx` (a tuple of index arrays, active lanes only) with every index in bounds."""
        data = self.memory.array(fld)
        for k, part in enumerate(idx):
            extent = data.shape[k]
            if isinstance(part, int):
                bad = 0 if not 0 <= part < extent else None
            elif part.size and (part.min() < 0 or part.max() >= extent):
                bad = int(np.flatnonzero((part < 0) | (part >= extent))[0])
            else:
                bad = None
            if bad is not None:
                raise out_of_bounds(fld, tuple(p if isinstance(p, int) else int(p[bad])
                                               for p in idx), site.loc)
        return data

    def load(self, fld, idx, lanes, site):
        data, where, _ = self.locate(fld, idx, len(lanes), site)
        return data[where]

    def store(self, fld, idx, values, lanes, site):
        data, where, _ = self.locate(fld, idx, len(lanes), site)
        data[where] = values           # of lanes storing to one element, the last one wins

    def atomic(self, op, fld, idx, values, lanes, site):
        data, where, _ = self.locate(fld, idx, len(lanes), site)
        ATOMIC_UFUNCS[op].at(data, where, values)     # lane after lane, in order


class _LaneCompiler:
    """Turns a parallel loop's body into closures over all lanes: expressions are
    f(run, mask) -> value, statements f(run, mask) -> None; mask None means every lane."""

    # ---- expressions ---------------------------------------------------------------------
    def expr(self, e: ir.Expr):
        if isinstance(e, ir.Const):
            value = e.dtype.np(e.value)
            return lambda run, mask: value
        if isinstance(e, ir.Var):
            name = e.name
            return lambda run, mask: run.env[name]
        if isinstance(e, ir.Load):
            return self.load(e)
        return self.op(e)

    def indices(self, indices):
        parts = tuple(self.expr(i) for i in indices)

        def active(run, mask):
            """The indices of the active lanes, and those lanes' numbers. An index the same
            for every lane stays an int (numpy broadcasts it), except that at least one is an
            array, with an entry per lane (a 0-d field has no index at all)."""
            lanes = run.iters if mask is None else run.iters[mask]
            out = []
            for p in parts:
                value = p(run, mask)
                if isinstance(value, np.ndarray) and value.ndim:
                    value = value if mask is None else value[mask]
                    out.append(value.astype(np.intp, copy=False))
                else:
                    out.append(int(value))
            if out and not any(isinstance(p, np.ndarray) for p in out):
                out[0] = np.full(len(lanes), out[0], dtype=np.intp)
            return tuple(out), lanes
        return active

    def load(self, e: ir.Load):
        fld, index = e.field, self.indices(e.indices)

        def load(run, mask):
            idx, lanes = index(run, mask)
            values = run.mem.load(fld, idx, lanes, e)
            if mask is None:
                return values
            out = np.zeros(run.n, dtype=values.dtype)
            out[mask] = values
            return out
        return load

    def op(self, e: ir.Op):
        if e.op == "random":
            raise Unsupported("ti.random()")
        result_type = e.dtype.np
        args = tuple(self.expr(a) for a in e.args)
        if e.op == "select":
            return self.select(args, result_type)
        if e.op in ("and", "or", "not"):
            fn = {"and": np.logical_and, "or": np.logical_or, "not": np.logical_not}[e.op]
        else:
            spec = TABLE[e.op]
            fn = spec.eval
            if e.dtype == T.f32 and spec.via_f64:
                inner = fn
                fn = lambda *xs: inner(*(np.asarray(x, dtype=np.float64) for x in xs))  # noqa: E731

        def typed(value):
            if isinstance(value, np.ndarray) and value.ndim:
                return value if value.dtype == result_type else value.astype(result_type)
            return result_type(value)
        if len(args) == 1:
            (a,) = args
            return lambda run, mask: typed(fn(a(run, mask)))
        a, b = args
        if e.op in ("floordiv", "mod") and e.dtype.is_int:   # the scalar path raises: so here
            def divide(run, mask):
                left, right = a(run, mask), b(run, mask)
                zero = np.asarray(right) == 0
                if (zero if mask is None else zero & mask).any():
                    raise division_by_zero(e.loc)
                with np.errstate(divide="ignore"):         # (lanes masked off: any value)
                    return typed(fn(left, right))
            return divide
        if e.op == "pow" and e.dtype.is_int:
            def power(run, mask):
                base, exponent = a(run, mask), b(run, mask)
                negative = np.asarray(exponent) < 0
                if (negative if mask is None else negative & mask).any():
                    raise negative_int_power(e.loc)
                return typed(fn(base, np.maximum(exponent, 0)))   # (masked-off lanes: any)
            return power
        return lambda run, mask: typed(fn(a(run, mask), b(run, mask)))

    def select(self, args, result_type):
        cond, a, b = args

        def select(run, mask):
            c = cond(run, mask)
            if not isinstance(c, np.ndarray) or not c.ndim:
                return result_type(a(run, mask) if c else b(run, mask))
            c = c.astype(bool)
            take_a = c if mask is None else c & mask
            take_b = ~c if mask is None else ~c & mask
            va = a(run, take_a) if take_a.any() else result_type(0)
            vb = b(run, take_b) if take_b.any() else result_type(0)
            return np.where(c, va, vb).astype(result_type, copy=False)
        return select

    # ---- statements ----------------------------------------------------------------------
    def block(self, stmts):
        compiled = tuple(self.stmt(s) for s in stmts)

        def run_block(run, mask):
            for s in compiled:
                s(run, mask)
        return run_block

    def stmt(self, s: ir.Stmt):
        kind = type(s)
        if kind is ir.Assign:
            return self.assign(s)
        if kind is ir.Store:
            fld, index, value = s.field, self.indices(s.indices), self.expr(s.value)
            dtype = s.field.dtype.np

            def store(run, mask):
                idx, lanes = index(run, mask)
                v = value(run, mask)
                v = _active(v, mask, run.n).astype(dtype, copy=False)
                run.mem.store(fld, idx, v, lanes, s)
            return store
        if kind is ir.AtomicOp:
            if s.result is not None:
                raise Unsupported("an atomic whose old value is used")
            fld, index, value, op = s.field, self.indices(s.indices), self.expr(s.value), s.op

            def atomic(run, mask):
                idx, lanes = index(run, mask)
                v = _active(value(run, mask), mask, run.n)
                run.mem.atomic(op, fld, idx, v, lanes, s)
            return atomic
        if kind is ir.If:
            return self.branch(s)
        if kind is ir.For:
            return self.loop(s)
        if kind is ir.Assert:
            return self.check(s)
        if kind is ir.Save:     # one stack per lane: interp/lanestack.py says why
            name = s.name
            return lambda run, mask: _stack(run, name).push(run.env.get(name), mask)
        if kind is ir.Restore:
            name = s.name

            def restore(run, mask):
                run.env[name] = _stack(run, name).pop(run.env.get(name), mask)
            return restore
        raise Unsupported(type(s).__name__)

    def check(self, s: ir.Assert):
        """An assert over the active lanes; the first lane (iteration) failing it is reported,
        with its values, as the scalar path would report it."""
        cond, values = self.expr(s.cond), tuple(self.expr(v) for v in s.values)

        def check(run, mask):
            held = _full(np.asarray(cond(run, mask)) != 0, run.n)
            failing = ~held if mask is None else ~held & mask
            if failing.any():
                lane = int(np.flatnonzero(failing)[0])
                shown = [_full(np.asarray(v(run, mask)), run.n)[lane] for v in values]
                raise assertion_failed(s.template, shown, s.loc)
        return check

    def assign(self, s: ir.Assign):
        name, value = s.name, self.expr(s.value)

        def assign(run, mask):
            run.env[name] = _merge(mask, value(run, mask), run.env.get(name), run.n)
        return assign

    def branch(self, s: ir.If):
        cond, then, orelse = self.expr(s.cond), self.block(s.then), self.block(s.orelse)
        has_else = bool(s.orelse)

        def branch(run, mask):
            c = cond(run, mask)
            if not isinstance(c, np.ndarray) or not c.ndim:
                (then if c else orelse)(run, mask)
                return
            c = c.astype(bool)
            taken = c if mask is None else c & mask
            if taken.any():
                then(run, taken)
            if has_else:
                rest = ~c if mask is None else ~c & mask
                if rest.any():
                    orelse(run, rest)
        return branch

    def loop(self, s: ir.For):
        var, start, stop, body = s.var, self.expr(s.start), self.expr(s.stop), self.block(s.body)
        reverse, i32 = s.reverse, np.int32

        def loop(run, mask):
            lo, hi = start(run, mask), stop(run, mask)
            varying = isinstance(lo, np.ndarray) or isinstance(hi, np.ndarray)
            if varying:
                lo_a, hi_a = _full(lo, run.n), _full(hi, run.n)
                lows, highs = (lo_a, hi_a) if mask is None else (lo_a[mask], hi_a[mask])
                if not lows.size:
                    return
                first, last = int(lows.min()), int(highs.max())
            else:
                first, last = int(lo), int(hi)
            steps = range(last - 1, first - 1, -1) if reverse else range(first, last)
            for i in steps:
                run.env[var] = i32(i)
                if varying:
                    inside = (lo_a <= i) & (i < hi_a)
                    lanes = inside if mask is None else inside & mask
                    if lanes.any():
                        body(run, lanes)
                else:
                    body(run, mask)
        return loop


def _stack(run, name) -> LaneStack:
    stack = run.stacks.get(name)
    if stack is None:
        stack = run.stacks[name] = LaneStack(run.n)
    return stack


def _active(value, mask, n):
    """A statement's value for the active lanes only (an array)."""
    value = _full(value, n) if isinstance(value, np.ndarray) else np.full(n, value)
    return value if mask is None else value[mask]


def outer_locals(kernel: ir.Kernel) -> frozenset:
    """The locals a kernel assigns outside its parallel loops (and its arguments): a parallel
    loop that assigns one of them carries it from iteration to iteration, which lanes do not."""
    names = {a.name for a in kernel.args}
    for top in kernel.body:
        if isinstance(top, ir.For) and top.parallel:
            continue
        for s in ir.walk_stmts((top,)):
            if isinstance(s, ir.Assign):
                names.add(s.name)
            elif isinstance(s, ir.AtomicOp) and s.result:
                names.add(s.result)
    return frozenset(names)


def compile_loop(s: ir.For, scalar_run, bounds, outer: frozenset = frozenset()):
    """The parallel loop `s` as lanes: run(frame) runs its iterations in chunks of lanes, or
    `scalar_run` (the evaluator's closure for the loop) where lanes cannot: a memory that has
    no lane form. `bounds`: the evaluator's closures for its start and stop (once per launch,
    a field read among them logged as the scalar path logs it). -> None if the loop's body
    uses what lanes do not run, or assigns a local of `outer` (the kernel's locals outside the
    loop: see outer_locals)."""
    if any(isinstance(b, ir.Assign) and b.name in outer for b in ir.walk_stmts(s.body)):
        return None
    try:
        body = _LaneCompiler().block(s.body)
    except Unsupported:
        return None
    var, reverse = s.var, s.reverse
    start, stop = bounds

    def run(fr):
        lanes_memory = lane_memory(fr.mem)
        if lanes_memory is None:
            return scalar_run(fr)
        lo, hi = int(start(fr)), int(stop(fr))
        order = np.arange(lo, hi, dtype=np.int32)
        if reverse:
            order = order[::-1]
        for begin in range(0, len(order), CHUNK):
            iters = order[begin:begin + CHUNK]
            chunk = LaneRun(dict(fr.env), iters, lanes_memory)
            chunk.env[var] = iters
            body(chunk, None)
    return run


# Memory classes with a lane form: type -> factory(memory) -> lane memory (tinyad/customcheck.py
# adds its own here).
LANE_MEMORIES: dict = {}


def lane_memory(memory):
    kind = type(memory)
    if kind is Memory:
        return PlainLanes(memory)
    factory = LANE_MEMORIES.get(kind)
    return None if factory is None else factory(memory)
