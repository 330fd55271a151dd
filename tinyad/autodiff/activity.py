"""Activity analysis: which values of a kernel carry a derivative, for either autodiff mode.

A value is active when a derivative can flow through it: it depends on a field that has the
twin the transform works with (".grad" for reverse mode, ".dual" for forward mode) or on an
active local, through differentiable operations only. Both transforms ask the same question of
every expression; what differs is only which twin counts and which locals are active:

  * reverse mode counts every float local as active (its adjoint is cheap to carry, and a local
    assigned from a constant still passes on the gradient of what it is later assigned);
  * forward mode computes the active locals to a fixed point (a local is active when any of its
    assignments is), so a local that never meets a tangent gets no tangent variable.

Where a derivative path is cut (floor, a float -> int cast, ...) the analysis notes (loc, op)
so the API can tell the user once where their gradient stops.
"""
from __future__ import annotations

from tinyad.core import ir
from tinyad.core.ops import TABLE, cast_keeps_gradient


def twin_of(fld, twin: str):
    """The field's `twin` ("grad" or "dual") where a float field has one, else None (always
    None for twin=None: no field carries a derivative)."""
    other = fld.twin_field(twin) if twin is not None else None
    return other if other is not None and fld.dtype.is_float else None


class Activity:
    """Answers "is this expression active?" for one kernel and one twin."""

    def __init__(self, twin: str, active_locals: set | None = None):
        self.twin = twin
        self.active_locals = active_locals   # None: every float local is active
        self.notes: list = []                 # (loc, op) where a derivative path is cut
        self._memo: dict = {}

    @classmethod
    def of_kernel(cls, kernel: ir.Kernel, twin: str | None, seeds=()) -> Activity:
        """Forward-style activity: the locals that can carry a derivative, to a fixed point,
        starting from the locals named in `seeds` (a function's inputs)."""
        activity = cls(twin, set(seeds))
        changed = True
        while changed:
            changed = False
            for s in ir.walk_stmts(kernel.body):
                name = None
                if isinstance(s, ir.Assign) and activity.active(s.value):
                    name = s.name
                elif (isinstance(s, ir.AtomicOp) and s.result is not None
                      and twin_of(s.field, twin) is not None):
                    name = s.result
                if name is not None and name not in activity.active_locals:
                    activity.active_locals.add(name)
                    activity._memo.clear()   # answers about Vars may have changed
                    changed = True
        activity.notes.clear()
        activity._memo.clear()
        return activity

    def local_active(self, name: str) -> bool:
        return self.active_locals is None or name in self.active_locals

    def active(self, e: ir.Expr) -> bool:
        """Can a derivative flow between `e` and a float local or a field with the twin?"""
        # Keyed by the node itself (identity hash), not id(): the transforms build and drop
        # temporary nodes, and a recycled id must not inherit a stale answer.
        if e not in self._memo:
            self._memo[e] = self._compute(e)
        return self._memo[e]

    def _compute(self, e):
        if isinstance(e, ir.Op):
            if e.op in ("stop_grad", "random"):
                return False   # cut on purpose: nothing to note below it
            args = e.args[1:] if e.op == "select" else e.args   # a condition carries none
            carries = any(self.active(a) for a in args)
            cut = TABLE[e.op].partials is None or (
                e.op == "cast" and not cast_keeps_gradient(e.dtype, e.args[0].dtype))
            if cut and carries:
                self.notes.append((e.loc, e.op))   # the derivative path ends here
            return e.dtype.is_float and carries and not cut
        if not e.dtype.is_float:
            return False
        if isinstance(e, ir.Var):
            return self.local_active(e.name)
        if isinstance(e, ir.Load):
            return twin_of(e.field, self.twin) is not None
        return False
