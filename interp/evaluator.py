"""The tree-walking interpreter: runs tinyad IR over numpy-backed fields.

Each IR node is turned once into a Python closure that evaluates it (a closure per node, so the
walk does no dispatching at run time); `Program.run` then executes the closures. Values are numpy
scalars of the node's dtype, so f32 kernels round like f32 hardware. Global accesses go through a
Memory object (interp/memory.py), which bounds-checks and can log them. Parallel loops run their
iterations in order.
"""
from __future__ import annotations

import numpy as np

from tinyad import ir
from tinyad.ops import TABLE
from tinyad.runtime import runtime

from interp.memory import Memory


class _Break(Exception):
    """Unwinds to the innermost loop."""


class Frame:
    """The state of one kernel launch."""
    __slots__ = ("env", "mem", "stacks", "ret")

    def __init__(self, env, mem):
        self.env, self.mem, self.stacks, self.ret = env, mem, {}, None


# ---- expressions --------------------------------------------------------------------------

def _expr(e: ir.Expr):
    if isinstance(e, ir.Const):
        value = e.dtype.np(e.value)
        return lambda fr: value
    if isinstance(e, ir.Var):
        name = e.name
        return lambda fr: fr.env[name]
    if isinstance(e, ir.Load):
        return _load(e)
    return _op(e)


def _indices(indices):
    parts = tuple(_expr(i) for i in indices)
    if len(parts) == 1:
        (a,) = parts
        return lambda fr: (int(a(fr)),)
    if len(parts) == 2:
        a, b = parts
        return lambda fr: (int(a(fr)), int(b(fr)))
    return lambda fr: tuple(int(p(fr)) for p in parts)


def _load(e: ir.Load):
    field, loc, index = e.field, e.loc, _indices(e.indices)
    return lambda fr: fr.mem.load(field, index(fr), loc)


def _op(e: ir.Op):
    spec, result_type = TABLE[e.op], e.dtype.np
    args = tuple(_expr(a) for a in e.args)
    if e.op == "select":
        cond, a, b = args
        return lambda fr: a(fr) if cond(fr) else b(fr)
    if e.op in ("cast", "stop_grad"):
        (a,) = args
        return lambda fr: result_type(a(fr))
    if e.op == "random":
        if e.dtype.is_float:
            return lambda fr: result_type(runtime.rng.random())
        return lambda fr: result_type(runtime.rng.integers(-2**31, 2**31))
    fn = spec.eval

    def fix(value):
        return value if type(value) is result_type else result_type(value)
    if len(args) == 1:
        (a,) = args
        return lambda fr: fix(fn(a(fr)))
    a, b = args
    return lambda fr: fix(fn(a(fr), b(fr)))


# ---- statements ---------------------------------------------------------------------------

def _block(stmts):
    compiled = tuple(_stmt(s) for s in stmts)
    if len(compiled) == 1:
        return compiled[0]

    def run(fr):
        for s in compiled:
            s(fr)
    return run


def _stmt(s: ir.Stmt):
    kind = type(s)
    if kind is ir.Assign:
        name, value = s.name, _expr(s.value)

        def assign(fr):
            fr.env[name] = value(fr)
        return assign
    if kind is ir.Store:
        field, loc, index, value = s.field, s.loc, _indices(s.indices), _expr(s.value)
        return lambda fr: fr.mem.store(field, index(fr), value(fr), loc)
    if kind is ir.AtomicOp:
        return _atomic(s)
    if kind is ir.If:
        cond, then, orelse = _expr(s.cond), _block(s.then), _block(s.orelse)

        def branch(fr):
            if cond(fr):
                then(fr)
            else:
                orelse(fr)
        return branch
    if kind is ir.For:
        return _for(s)
    if kind is ir.While:
        return _while(s)
    if kind is ir.Break:
        def brk(fr):
            raise _Break
        return brk
    if kind is ir.Return:
        value = _expr(s.value)

        def ret(fr):
            fr.ret = value(fr)
        return ret
    if kind is ir.Save:
        name = s.name
        return lambda fr: fr.stacks.setdefault(name, []).append(fr.env[name])
    if kind is ir.Restore:
        name = s.name

        def restore(fr):
            fr.env[name] = fr.stacks[name].pop()
        return restore
    raise TypeError(f"interp: unknown statement {s!r}")  # pragma: no cover  (closed IR)


def _atomic(s: ir.AtomicOp):
    op, field, loc, result = s.op, s.field, s.loc, s.result
    index, value = _indices(s.indices), _expr(s.value)
    if result is None:
        return lambda fr: fr.mem.atomic(op, field, index(fr), value(fr), loc)

    def atomic_with_result(fr):
        fr.env[result] = fr.mem.atomic(op, field, index(fr), value(fr), loc)
    return atomic_with_result


def _for(s: ir.For):
    var, start, stop, body = s.var, _expr(s.start), _expr(s.stop), _block(s.body)
    reverse, parallel, i32 = s.reverse, s.parallel, np.int32

    def loop(fr):
        lo, hi = int(start(fr)), int(stop(fr))
        env = fr.env
        indices = range(hi - 1, lo - 1, -1) if reverse else range(lo, hi)
        try:
            for i in indices:
                env[var] = i32(i)
                if parallel:
                    fr.mem.begin_iteration(s, i)
                body(fr)
        except _Break:
            pass
    return loop


def _while(s: ir.While):
    cond, body = _expr(s.cond), _block(s.body)

    def loop(fr):
        try:
            while cond(fr):
                body(fr)
        except _Break:
            pass
    return loop


class Program:
    """A kernel's IR, turned into closures once, ready to run many times."""

    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel
        self._body = _block(kernel.body) if kernel.body else (lambda fr: None)

    def run(self, args: tuple, memory: Memory | None = None):
        env = {a.name: a.dtype.np(v) for a, v in zip(self.kernel.args, args)}
        frame = Frame(env, memory or Memory())
        with np.errstate(all="ignore"):
            self._body(frame)
        if frame.ret is None:
            return None
        return frame.ret.item()
