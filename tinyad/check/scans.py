"""Loads that read what their own launch stored, never what the field held before it
(check/launches.py: a field computed before a Tape and rewritten by the taped kernel before it
reads it is no lost gradient): a load after its own iteration's store of the same element
(`loads_after_own_stores`), and a scan, a load of what an earlier iteration of its own serial
loop stored, as in front-to-back compositing (`if s > 0: before = tape[r, s - 1]`, then
`tape[r, s] = ...`; `loads_of_earlier_iterations`)."""
from __future__ import annotations

from tinyad.analysis.queries import assigned
from tinyad.core import ir, printer


def loads_of_earlier_iterations(kernel: ir.Kernel) -> frozenset:
    """ids of the Loads `f[..., v - c, ...]` (c >= 1) inside a serial `for v in range(lo, ...)`
    that runs them only where v - c >= lo (under `if v > k` / `if v >= k`), when every
    iteration of that loop stores `f[..., v, ...]` (a store at the top of its body, with no
    `break` in it) at the same other indices, over locals the loop does not assign; and, after
    a loop from 0, the loads of `f[..., stop - c, ...]`."""
    found = set()
    for block in _blocks(kernel.body):
        for n, loop in enumerate(block):
            if (isinstance(loop, ir.For) and not loop.parallel and not loop.reverse
                    and isinstance(loop.start, ir.Const)
                    and not any(isinstance(s, ir.Break) for s in ir.walk_stmts(loop.body))):
                stores = _stores_at_the_loop_index(loop)
                if stores:
                    _find_guarded_loads(loop, loop.body, stores, None, found)
                    if loop.start.value == 0 and _fixed(loop.stop, loop.body):
                        _find_loads_after(loop, block[n + 1:], stores, found)
    return frozenset(found)


def _fixed(expr, body) -> bool:
    """`expr` has the same value after `body` as before it: no field read, no local assigned."""
    changing = assigned(body)
    return not any(isinstance(e, ir.Load) or (isinstance(e, ir.Var) and e.name in changing)
                   for e in ir.walk_expr(expr))


def _blocks(body):
    """Every block of statements in `body`, nested ones too."""
    yield body
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.If):
            yield s.then
            yield s.orelse
        elif isinstance(s, (ir.For, ir.While)):
            yield s.body


def _find_loads_after(loop: ir.For, rest, stores: set, found: set) -> None:
    """Loads of `f[..., stop - c, ...]` (c >= 1) after a loop from 0 (the statements of its
    block that follow it, until one assigns a local those indices use): the element one of
    its iterations stored, or else out of bounds (an index below 0, reported as such)."""
    for s in rest:
        if isinstance(s, (ir.If, ir.For, ir.While)) and assigned([s]):
            return        # (conservative: any local assigned ends what is known)
        for inner in ir.walk_stmts([s]):
            for expr in ir.stmt_exprs(inner):
                for e in ir.walk_expr(expr):
                    if isinstance(e, ir.Load) and _at_offset_below(e, loop.stop, stores):
                        found.add(id(e))
        if assigned([s]):
            return


def _at_offset_below(load: ir.Load, stop, stores: set) -> bool:
    """`load` reads f[..., stop - c, ...] (or a constant below a constant stop) where the
    loop stored f[..., v, ...]."""
    for p, index in enumerate(load.indices):
        if (isinstance(index, ir.Op) and index.op == "sub" and len(index.args) == 2
                and printer.format_expr(index.args[0]) == printer.format_expr(stop)
                and isinstance(index.args[1], ir.Const) and isinstance(index.args[1].value, int)
                and index.args[1].value >= 1) or (
                isinstance(index, ir.Const) and isinstance(stop, ir.Const)
                and isinstance(index.value, int) and 0 <= index.value < stop.value):
            others = tuple(printer.format_expr(i) for q, i in enumerate(load.indices) if q != p)
            if (id(load.field), p, others) in stores:
                return True
    return False


def _stores_at_the_loop_index(loop: ir.For) -> set:
    """(field id, position of v, the other indices printed) of each store at the top of the
    loop's body whose index is v at one position and fixed in the loop at the others."""
    changing = assigned(loop.body) | {loop.var}
    keys = set()
    for s in loop.body:
        if not isinstance(s, ir.Store):
            continue
        for p, index in enumerate(s.indices):
            others = [i for q, i in enumerate(s.indices) if q != p]
            if _is_var(index, loop.var) and not any(
                    isinstance(e, ir.Load) or (isinstance(e, ir.Var) and e.name in changing)
                    for i in others for e in ir.walk_expr(i)):
                keys.add((id(s.field), p, tuple(printer.format_expr(i) for i in others)))
    return keys


def _find_guarded_loads(loop: ir.For, block, stores: set, low, found: set) -> None:
    """Walk `block` of `loop`'s body; `low`: the least v the enclosing `if`s let through."""
    for s in block:
        if isinstance(s, ir.If):
            _find_guarded_loads(loop, s.then, stores, _lower_bound(s.cond, loop.var, low),
                                found)
            _find_guarded_loads(loop, s.orelse, stores, low, found)
            continue
        if isinstance(s, (ir.For, ir.While)):
            _find_guarded_loads(loop, s.body, stores, low, found)
        if low is None:
            continue
        for expr in ir.stmt_exprs(s):
            for e in ir.walk_expr(expr):
                if isinstance(e, ir.Load) and _reads_an_earlier_store(e, loop, stores, low):
                    found.add(id(e))


def _lower_bound(cond, var: str, low):
    """The least v that `cond` lets through, if it is `v > k` or `v >= k` (k a constant)."""
    if isinstance(cond, ir.Op) and cond.op in ("gt", "ge") and len(cond.args) == 2:
        v, k = cond.args
        if _is_var(v, var) and isinstance(k, ir.Const) and isinstance(k.value, int):
            bound = k.value + 1 if cond.op == "gt" else k.value
            return bound if low is None else max(low, bound)
    return low


def _reads_an_earlier_store(load: ir.Load, loop: ir.For, stores: set, low: int) -> bool:
    for p, index in enumerate(load.indices):
        if (isinstance(index, ir.Op) and index.op == "sub" and len(index.args) == 2
                and _is_var(index.args[0], loop.var)
                and isinstance(index.args[1], ir.Const) and isinstance(index.args[1].value, int)
                and index.args[1].value >= 1 and low - index.args[1].value >= loop.start.value):
            others = tuple(printer.format_expr(i) for q, i in enumerate(load.indices) if q != p)
            if (id(load.field), p, others) in stores:
                return True
    return False


def _is_var(expr, name: str) -> bool:
    return isinstance(expr, ir.Var) and expr.name == name


def loads_after_own_stores(kernel: ir.Kernel) -> frozenset:
    """ids of the Loads that read an element their own iteration wrote just before, on every
    path to them (DiffTaichi's g2p: `v[f + 1, p] = new_v`, then `x[f + 1, p] = x[f, p] + dt *
    v[f + 1, p]`): a store or atomic earlier in an enclosing block, with index expressions
    printed alike over locals nothing has assigned since."""
    found = set()

    def key(node):
        return id(node.field), tuple(printer.format_expr(i) for i in node.indices)

    def mentions(node) -> set:
        return {e.name for i in node.indices for e in ir.walk_expr(i) if isinstance(e, ir.Var)}

    def note_loads(exprs, written):
        for expr in exprs:
            for e in ir.walk_expr(expr):
                if isinstance(e, ir.Load) and key(e) in written:
                    found.add(id(e))

    def forget(written, names):
        return {k: used for k, used in written.items() if not used & names}

    def walk(block, written: dict) -> None:
        for s in block:
            if isinstance(s, ir.While):        # its condition runs again after the body
                inner = forget(written, assigned(s.body))
                note_loads(ir.stmt_exprs(s), inner)
                walk(s.body, inner)
            else:
                note_loads(ir.stmt_exprs(s), written)
            if isinstance(s, (ir.Store, ir.AtomicOp)):
                written[key(s)] = mentions(s)
            elif isinstance(s, (ir.Assign, ir.Restore)):
                written = forget(written, {s.name})
            if isinstance(s, ir.If):
                walk(s.then, dict(written))
                walk(s.orelse, dict(written))
            elif isinstance(s, ir.For):
                walk(s.body, forget(written, assigned(s.body) | {s.var}))
            if isinstance(s, (ir.If, ir.For, ir.While)):
                written = forget(written, assigned([s]))
            if isinstance(s, ir.AtomicOp) and s.result:
                written = forget(written, {s.result})

    walk(kernel.body, {})
    return frozenset(found)
