"""Planning the generated loops: which parallel loop becomes `prange`, how each atomic in it
is lowered, and in which scope each local's first value and save stack live.

`Planner` is a mixin of the generator (compile/pysource.py); see that module's docstring for
the rules it implements.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tinyad.analysis.queries import (
    accesses,
    assigned,
    direct_break,
    maybe_unassigned,
    referenced,
    region_locals,
    static_trip,
    without,
)
from tinyad.core import ir

PRIVATE_BYTES = 16 << 20  # the largest field a parallel loop gives per-thread copies of
MAX_BLOCK_SPAN = 8        # the widest stencil (in rows) that blocking handles


def row_span(uses, var: str) -> int | None:
    """When every access indexes, at one same position, `var + c` (c a constant): the spread
    of c, the most rows apart two iterations touching one element can be (0: each iteration
    owns its elements). None when no position is like that for all accesses."""
    best = None
    for position in range(min((len(ix) for ix, _ in uses), default=0)):
        offsets = [_offset(ix[position], var) for ix, _ in uses]
        if None not in offsets:
            span = max(offsets) - min(offsets)
            best = span if best is None else min(best, span)
    return best


def _offset(index, var):
    if isinstance(index, ir.Var):
        return 0 if index.name == var else None
    if (isinstance(index, ir.Op) and index.op in ("add", "sub")
            and isinstance(index.args[1], ir.Const) and isinstance(index.args[0], ir.Var)
            and index.args[0].name == var):
        return int(index.args[1].value) * (1 if index.op == "add" else -1)
    return None


@dataclass
class LoopPlan:
    """How one parallel IR loop is emitted."""
    stmt: ir.For
    atomics: dict = field(default_factory=dict)      # id(AtomicOp) -> "plain"|"atomic"|acc name
    reductions: list = field(default_factory=list)   # (acc name, field, indices, dtype)
    private: dict = field(default_factory=dict)      # id(field) -> (field, per-thread copies)
    ordinal: int = 0                                 # 1, 2, ...: its random streams' key
    # > 0: the loop runs in two phases of row blocks at least this far apart (stencils)
    block_span: int = 0


class Planner:
    """Loop and scope planning, mixed into the generator."""

    def trip(self, loop: ir.For):
        """Iterations of the loop's whole body: a nested ndrange loop counts its inner loops
        (compile/nesting.py), or None when not static."""
        return self.work.get(id(loop)) or static_trip(loop)

    def plan_all_scopes(self):
        kernel = self.kernel
        self.stack_scope = self.plan_scopes({s.name for s in ir.walk_stmts(kernel.body)
                                             if isinstance(s, (ir.Save, ir.Restore))},
                                            saves_only=True)
        self.init_scope = self.plan_scopes(set(self.types) - {a.name for a in kernel.args},
                                           saves_only=False)
        self.needs_init = maybe_unassigned(kernel.body, {a.name for a in kernel.args})
        self.versioned = region_locals(kernel.body, {a.name for a in kernel.args})
        self.current: dict[str, str] = {}     # versioned local -> its Python name now
        self.uses_chunks = False

    def plan_parallel(self):
        body = self.kernel.body
        args = {a.name for a in self.kernel.args}
        for s in body:
            if not (isinstance(s, ir.For) and s.parallel):
                continue
            if self.debug and self.target == "cpu":    # numba checks bounds only serially
                continue
            if direct_break(s.body):
                continue
            inside = assigned((s,))
            outside = referenced(without(body, s)) | args
            if inside & outside:
                continue
            trip = self.trip(s)
            if self.target == "cpu" and trip is not None and trip < max(self.parallel_min, 2):
                continue
            self.loops[id(s)] = self.plan_atomics(s)
            self.loops[id(s)].ordinal = len(self.loops)

    def plan_atomics(self, loop: ir.For) -> LoopPlan:
        plan = LoopPlan(loop)
        by_field: dict[int, list] = {}
        for f, indices, node in accesses(loop.body):
            by_field.setdefault(id(f), []).append((indices, node))
        loop_var_free = loop.var not in assigned(loop.body)
        stencils = {}         # id(atomic) -> its field's row span, for blocking
        for s in ir.walk_stmts(loop.body):
            if not isinstance(s, ir.AtomicOp):
                continue
            uses = by_field[id(s.field)]
            span = row_span(uses, loop.var) if loop_var_free else None
            if span == 0:
                plan.atomics[id(s)] = "plain"     # each iteration owns its elements
            elif span is not None and span <= MAX_BLOCK_SPAN and self.target == "cpu":
                stencils[id(s)] = span
            elif self.target == "cpu" and self.privatize(loop, s.field, uses):
                if id(s.field) not in plan.private:
                    plan.private[id(s.field)] = (
                        s.field, self.names.temp(f"p_{self.field_names[id(s.field)]}"))
                plan.atomics[id(s)] = "private"
            elif all(isinstance(n, ir.AtomicOp) and n.op in ("add", "sub") and not n.result
                     and all(isinstance(i, ir.Const) for i in ix) for ix, n in uses):
                # one accumulator per statement (numba's reduction detection accepts a single
                # update of each reduction variable per iteration); on CUDA, one per thread
                acc = self.names.temp("acc")
                plan.reductions.append((acc, s.field, s.indices, s.field.dtype))
                plan.atomics[id(s)] = acc
            else:
                plan.atomics[id(s)] = "atomic"
        # Stencil scatters (f[i - 1] += ..., f[i + 1] += ...): plain, if the loop can run in
        # row blocks (not with chunked sums: one loop shape at a time)
        blocked = not (plan.private or plan.reductions)
        for key, span in stencils.items():
            plan.atomics[key] = "plain" if blocked else "atomic"
            plan.block_span = max(plan.block_span, span) if blocked else 0
        return plan

    def privatize(self, loop, fld, uses) -> bool:
        """Scatter-adds into a field the loop only adds to, more of them per launch than the
        field has elements: each thread adds into its own copy, summed after the loop (on a few
        cores this beats atomics 2-4 times: notes/numba.md section 2)."""
        if not all(isinstance(n, ir.AtomicOp) and n.op in ("add", "sub") and not n.result
                   for _, n in uses):
            return False
        if all(isinstance(i, ir.Const) for ix, _ in uses for i in ix):
            return False                    # constant indices: a reduction is better
        trip = self.trip(loop)
        size = ir.array_size(fld)
        # the copies cost about `size` per thread (zero, then sum): worth it when the loop
        # adds more often than that (mpm's p2g: 8192 particles x 18 adds into a 128^2 x 2 grid)
        return (trip is not None and size <= trip * len(uses)
                and size * np.dtype(fld.dtype.np).itemsize <= PRIVATE_BYTES)

    def plan_scopes(self, names: set, saves_only: bool) -> dict:
        """name -> id(parallel loop) whose body is its only user, or None (the kernel's top)."""
        scope = {name: None for name in names}
        for key, plan in self.loops.items():
            loop = plan.stmt
            inside = referenced(loop.body)
            outside = referenced(without(self.kernel.body, loop))
            for name in names:
                if name in inside and name not in outside and name != loop.var:
                    scope[name] = key
        if not saves_only:
            for plan in self.loops.values():
                scope.pop(plan.stmt.var, None)        # prange binds it itself
        return scope
