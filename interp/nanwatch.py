"""Where a NaN or an infinity in a gradient first appeared: one launch of a derivative kernel
(an adjoint, or a tangent) re-run in the interpreter, with every float operation watched.

tinyad/check/nonfinite.py calls `locate` after a launch left a new non-finite value in a
gradient. The re-run works on copies of the fields the launch writes, so the program's fields
stay as the launch left them; the primal fields it reads are the ones the launch read (an
adjoint writes none). It stops at the first write of a non-finite value into a watched field and
says where that value came from: the first operation of that iteration that made a non-finite
value out of finite operands (its origin), and, evaluated at the same point, the primal
operation at that user's line whose value or derivative is not finite there, with the
`ti.select` branch it sits in when the select did not take it. With no such operation, the
non-finite value was loaded: a primal value already NaN, or a gradient flowing in.

The gradients a launch reads as its seeds are read as the launch left them (an adjoint zeroes
the gradient of each value it stores): the operations found depend on primal values only, but
a value printed downstream of a seed may differ from the launch's.
"""
from __future__ import annotations

import math

import numpy as np

from tinyad.check.nonfinite import NonFinite, Origin, Singular
from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core.ops import TABLE
from tinyad.core.printer import format_expr, format_stmt
from tinyad.interp.domain import NUMERIC, NumericDomain
from tinyad.interp.evaluator import Frame, Program, _Compiler
from tinyad.interp.memory import Memory

MAX_ORIGINS = 16     # per iteration: the first is the one reported


class _Found(Exception):
    """Unwinds the re-run at the first non-finite write into a watched field."""


def locate(traced, variant: str, scalars, targets) -> NonFinite | None:
    """Re-run `traced`'s `variant` launch with these scalars, watching for a non-finite value
    written into one of `targets`: -> what the first such write was and where its value came
    from, or None when the launch writes none (the value was there before it)."""
    kernel_ir = traced.variant_ir(variant)
    watch = _Watch(kernel_ir, traced.ir, targets)
    written = ir.fields_written(kernel_ir.body)
    memory = _WatchMemory(watch, written)
    watch.memory = memory
    try:
        Program(kernel_ir, _WatchDomain(watch)).run(scalars, np.random.default_rng(0),
                                                   memory=memory, echo=False)
    except _Found:
        pass
    finding = watch.finding
    if finding is not None and variant != "adjoint":
        loaded = {f for f in ir.fields_of(kernel_ir.body) if f.role == "primal"}
        if loaded & {f for f in written if f.role == "primal"}:
            finding.notes.append("re-run on the values the launch left (it updates in place)")
    return finding


def _finite(value) -> bool:
    try:
        return math.isfinite(value)
    except (TypeError, ValueError):
        return True


class _Watch:
    """What the re-run has seen so far in the current iteration."""

    def __init__(self, kernel_ir: ir.Kernel, primal_ir: ir.Kernel, targets):
        self.targets = {id(f) for f in targets}
        self.stmt_of = {}        # id(expression) -> the statement it belongs to
        for stmt in ir.walk_stmts(kernel_ir.body):
            for expr in ir.stmt_exprs(stmt):
                for sub in ir.walk_expr(expr):
                    self.stmt_of[id(sub)] = stmt
        self.primal_at: dict = {}     # (file, line) -> the primal statements written there
        for stmt in ir.walk_stmts(primal_ir.body):
            if isinstance(stmt, (ir.Assign, ir.Store, ir.AtomicOp)) and stmt.loc is not None:
                self.primal_at.setdefault((stmt.loc.file, stmt.loc.line), []).append(stmt)
        self.compiler = _Compiler(NUMERIC)
        self.compiled: dict = {}
        self.memory = None
        self.iteration = None
        self.origins: list[Origin] = []
        self.loaded: list[tuple] = []
        self.finding: NonFinite | None = None

    def begin_iteration(self, index) -> None:
        self.iteration = None if index is None else int(index)
        self.origins, self.loaded = [], []

    # ---- what the watched operations and accesses report ----------------------------------
    def operation(self, e: ir.Op, args, value, fr) -> None:
        """`e` evaluated to a non-finite value: an origin if its operands are all finite."""
        if len(self.origins) >= MAX_ORIGINS:
            return
        with self.memory.quietly():
            operands = [a(fr) for a in args]
        if not all(_finite(v) for v in operands):
            return
        stmt = self.stmt_of.get(id(e))
        loc = stmt.loc if stmt is not None and stmt.loc is not None else e.loc
        self.origins.append(Origin(
            text=format_expr(e), value=_plain(value), loc=loc,
            operands=tuple((format_expr(a), _plain(v)) for a, v in zip(e.args, operands)),
            stmt="" if stmt is None else format_stmt(stmt).strip(),
            singular=self.singular_at(loc, fr)))

    def load(self, fld, index, value) -> None:
        if len(self.loaded) < MAX_ORIGINS:
            self.loaded.append((fld, index, _plain(value)))

    def write(self, fld, index, value, site) -> None:
        """A non-finite value written into a watched field: the finding; the re-run stops."""
        self.finding = NonFinite(
            field=fld, element=tuple(int(i) for i in index), value=_plain(value),
            stmt=format_stmt(site).strip(), loc=site.loc, iteration=self.iteration,
            origin=self.origins[0] if self.origins else None,
            loaded=None if self.origins or not self.loaded else self.loaded[0])
        raise _Found

    # ---- the primal operation behind an origin -------------------------------------------
    def singular_at(self, loc, fr) -> Singular | None:
        """The first primal operation written at `loc` whose value or derivative is not
        finite at the point the re-run is at (locals as that statement saw them)."""
        if loc is None:
            return None
        with self.memory.quietly():
            for stmt in self.primal_at.get((loc.file, loc.line), ()):
                for root in ir.stmt_exprs(stmt):
                    found = self._singular(root, fr, None)
                    if found is not None:
                        return found
        return None

    def _singular(self, e, fr, untaken):
        if not isinstance(e, ir.Op):
            return None
        inner = [untaken] * len(e.args)
        if e.op == "select" and untaken is None:
            cond = bool(self._eval(e.args[0], fr))
            inner[2 if cond else 1] = (format_expr(e), format_expr(e.args[0]), cond)
        for arg, arg_untaken in zip(e.args, inner):
            found = self._singular(arg, fr, arg_untaken)
            if found is not None:
                return found
        spec = TABLE[e.op]
        if not e.dtype.is_float or not spec.differentiable or e.op in ("select", "cast"):
            return None
        args = [self._eval(a, fr) for a in e.args]
        if not all(_finite(v) for v in args):
            return None        # made non-finite further in: reported there
        value = self._eval(e, fr)
        partials = self._partials(e, args, value)
        if _finite(value) and all(p is None or _finite(p) for p in partials):
            return None
        return Singular(op=e.op, text=format_expr(e), args=tuple(_plain(a) for a in args),
                        value=_plain(value), partials=partials, untaken=untaken,
                        arg_texts=tuple(format_expr(a) for a in e.args), loc=e.loc)

    def _eval(self, e, fr):
        run = self.compiled.get(id(e))
        if run is None:
            run = self.compiled[id(e)] = self.compiler.expr(e)
        return run(fr)

    def _partials(self, e: ir.Op, args, value) -> tuple:
        """d(e)/d(arg) for each operand at these values (None where the op table has none),
        from the op table's own rules, as reverse and forward mode use them."""
        names = [f"_arg{k}" for k in range(len(args))]
        with B.at(e.loc):
            forms = TABLE[e.op].partials(
                tuple(ir.Var(n, a.dtype, e.loc) for n, a in zip(names, e.args)),
                ir.Var("_out", e.dtype, e.loc))
        frame = Frame({**dict(zip(names, args)), "_out": value}, Memory(), None)
        out = []
        for form in forms:
            if form is None or not isinstance(form, ir.Expr):
                out.append(None if form is None else float(form))
            else:
                out.append(_plain(self.compiler.expr(form)(frame)))
        return tuple(out)


class _WatchDomain(NumericDomain):
    """Numbers as in the numeric domain; each float operation's result is looked at."""

    def __init__(self, watch: _Watch):
        self.watch = watch

    def op(self, e: ir.Op, args):
        run = super().op(e, args)
        if not e.dtype.is_float:
            return run
        watch = self.watch

        def watched(fr):
            value = run(fr)
            if not _finite(value):
                watch.operation(e, args, value, fr)
            return value
        return watched


class _WatchMemory(Memory):
    """Copies of the fields the launch writes (the program's own stay as they are); loads of
    non-finite values noted, and non-finite writes into watched fields stopped at."""

    def __init__(self, watch: _Watch, written):
        self.watch = watch
        self.copies = {id(f): f.host_array.copy() for f in written}
        self.quiet = False

    def quietly(self):
        return _Quiet(self)

    def array(self, fld):
        copy = self.copies.get(id(fld))
        return fld.host_array if copy is None else copy

    def load(self, fld, index, site):
        value = super().load(fld, index, site)
        if not self.quiet and fld.dtype.is_float and not _finite(value):
            self.watch.load(fld, index, value)
        return value

    def store(self, fld, index, value, site):
        if id(fld) in self.watch.targets and not _finite(value):
            self.watch.write(fld, index, value, site)
        super().store(fld, index, value, site)

    def atomic(self, op, fld, index, value, site):
        if id(fld) in self.watch.targets and not _finite(value):
            self.watch.write(fld, index, value, site)
        return super().atomic(op, fld, index, value, site)

    def begin_iteration(self, loop, index):
        self.watch.begin_iteration(index)


class _Quiet:
    """While the watch evaluates primal operations itself, their loads are not the launch's."""

    def __init__(self, memory: _WatchMemory):
        self.memory, self.was = memory, memory.quiet

    def __enter__(self):
        self.memory.quiet = True

    def __exit__(self, *exc):
        self.memory.quiet = self.was


def _plain(value):
    return value.item() if hasattr(value, "item") else value
