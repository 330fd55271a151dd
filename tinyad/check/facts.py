"""What the launch checks need to know of a kernel, read once from its IR and its adjoint's: the
primal fields it writes and loads (and where first), the loads its adjoint replays, the gradients
its adjoint adds to, and which float fields each store's value depends on."""
from __future__ import annotations

from dataclasses import dataclass

from tinyad.analysis.queries import replayed_loads
from tinyad.check.scans import loads_after_own_stores, loads_of_earlier_iterations
from tinyad.check.zeroing import zeroed_gradients
from tinyad.core import ir
from tinyad.core.errors import TinyadError


@dataclass(frozen=True)
class KernelFacts:
    written: tuple          # primal fields stored or accumulated into
    loaded: tuple           # primal fields loaded
    replayed: frozenset     # id() of the loads the adjoint kernel replays
    dependencies: tuple     # (target field, source fields, store loc) per store
    first_store: dict       # field -> loc of its first store
    first_load: dict        # field -> loc of its first load
    adjoint_targets: tuple  # the .grad fields the adjoint kernel accumulates into
    grads_stored: tuple     # .grad fields the kernel itself stores into (clear_grid's zeroing)
    grads_zeroed: tuple     # those its IR proves every launch leaves all zero (check/zeroing.py)
    grads_by_hand: tuple    # .grad fields it adds to or stores into, not to zero them: a
                            # gradient written by hand (PlasticineLab's svd_grad kernel)
    grads_loaded: tuple     # .grad fields it loads (a gradient kernel written by hand)
    loaded_own: frozenset   # primal fields each of whose loads reads what its own iteration
                            # wrote just before (check/scans.py loads_after_own_stores), or
                            # an earlier iteration of its serial loop (check/scans.py)
    loads_differentiable: tuple  # the primal fields with a gradient it loads
    first_grad_load: dict   # .grad field -> loc of its first load
    hand_gradient: bool     # a gradient kernel written by hand: grads_by_hand and grads_loaded
                            # (check/handgrads.py judges its launches)


def kernel_facts(compiled) -> KernelFacts:
    """The facts about `compiled` (a traced kernel), worked out once."""
    return compiled.memos[analyse]


def analyse(compiled) -> KernelFacts:
    """The facts worked out, once per kernel: `compiled.memos[analyse]` is kernel_facts(compiled)
    without its call (a checked launch asks at every launch: tinyad/launch.py)."""
    body = compiled.ir.body
    written, loaded, first_store, first_load, grads_stored = {}, {}, {}, {}, {}
    grads_written, grads_loaded, first_grad_load = {}, {}, {}
    own = loads_after_own_stores(compiled.ir) | loads_of_earlier_iterations(compiled.ir)
    not_own = set()          # id() of the primal fields some load reads from before
    for stmt in ir.walk_stmts(body):
        if isinstance(stmt, ir.Store) and stmt.field.role == "grad":
            grads_stored.setdefault(id(stmt.field), stmt.field)
        if isinstance(stmt, (ir.Store, ir.AtomicOp)) and stmt.field.role == "grad":
            grads_written.setdefault(id(stmt.field), stmt.field)
        if isinstance(stmt, (ir.Store, ir.AtomicOp)) and stmt.field.role == "primal":
            written.setdefault(id(stmt.field), stmt.field)
            first_store.setdefault(stmt.field, stmt.loc)
        for expr in ir.stmt_exprs(stmt):
            for sub in ir.walk_expr(expr):
                if isinstance(sub, ir.Load) and sub.field.role == "primal":
                    loaded.setdefault(id(sub.field), sub.field)
                    first_load.setdefault(sub.field, sub.loc)
                    if id(sub) not in own:
                        not_own.add(id(sub.field))
                elif isinstance(sub, ir.Load) and sub.field.role == "grad":
                    grads_loaded.setdefault(id(sub.field), sub.field)
                    first_grad_load.setdefault(sub.field, sub.loc)
    try:
        adjoint = compiled.adjoint_ir()
        replayed = frozenset(id(load) for load in replayed_loads(adjoint))
        targets = {id(s.field): s.field for s in ir.walk_stmts(adjoint.body)
                   if isinstance(s, ir.AtomicOp) and s.field.role == "grad"}
    except TinyadError:   # not differentiable: reported if its .grad() is ever called
        replayed, targets = frozenset(), {}
    zeroed = zeroed_gradients(compiled.ir)
    by_hand = tuple(f for f in grads_written.values() if f not in zeroed)
    return KernelFacts(tuple(written.values()), tuple(loaded.values()), replayed,
                       _dependencies(body), first_store, first_load, tuple(targets.values()),
                       tuple(grads_stored.values()), zeroed, by_hand,
                       tuple(grads_loaded.values()),
                       frozenset(f for k, f in loaded.items() if k not in not_own),
                       tuple(f for f in loaded.values() if f.has_grad),
                       first_grad_load, bool(by_hand and grads_loaded))


def _dependencies(body) -> tuple:
    """For each store: the float fields its value depends on (through locals, flow-insensitive),
    in program order (a report names the first: the same one in every run)."""
    local_sources: dict[str, dict] = {}      # (dicts as ordered sets)

    def sources(expr) -> dict:
        out = {}
        for sub in _differentiated(expr):
            if isinstance(sub, ir.Load) and sub.field.dtype.is_float:
                out[sub.field] = None
            elif isinstance(sub, ir.Var):
                out.update(local_sources.get(sub.name, {}))
        return out
    changed = True
    while changed:   # locals can feed each other around loops: iterate to a fixed point
        changed = False
        for stmt in ir.walk_stmts(body):
            if isinstance(stmt, ir.Assign):
                found = sources(stmt.value)
                held = local_sources.setdefault(stmt.name, {})
                if not found.keys() <= held.keys():
                    held.update(found)
                    changed = True
    return tuple((s.field, tuple(sources(s.value)), s.loc) for s in ir.walk_stmts(body)
                 if isinstance(s, (ir.Store, ir.AtomicOp)) and s.field.dtype.is_float)


def _differentiated(expr):
    """The sub-expressions a gradient would flow through: all but those inside ti.stop_grad(...)
    (where the user says the gradient stops, it is not missing)."""
    if isinstance(expr, ir.Op) and expr.op == "stop_grad":
        return
    yield expr
    if isinstance(expr, ir.Load):
        for index in expr.indices:
            yield from _differentiated(index)
    elif isinstance(expr, ir.Op):
        for arg in expr.args:
            yield from _differentiated(arg)
