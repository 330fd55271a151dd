"""Which fields one launch may break a rule on within itself: reads and writes of one field in
one launch, proven free of in-launch hazards from the IR where they can be (the rule checker's
launch plans, tinyad/check/regions.py)."""
from __future__ import annotations

from tinyad.analysis.sites import access_sites
from tinyad.core import ir


def _parallel_var(loop) -> str | None:
    return loop.var if isinstance(loop, ir.For) and loop.parallel else None


def _one_element_per_iteration(loop, sites) -> bool:
    """In parallel `loop`, the loop variable (or all the indices a flattened ndrange recovers
    from it) sits at one index position in every site: two iterations never touch one element
    through them."""
    var = _parallel_var(loop)
    if var is None:
        return False
    for names in ({var}, _flat_digits(loop)):
        if names and all(_common_position(sites, name) for name in names):
            return True
    return False


def _common_position(sites, name) -> bool:
    positions = None
    for s in sites:
        here = {d for d, e in enumerate(s.indices) if isinstance(e, ir.Var) and e.name == name}
        positions = here if positions is None else positions & here
        if not positions:
            return False
    return True


def _flat_digits(loop) -> set:
    """The locals a flattened n-d loop (`for i, j in ti.ndrange(...)`, `for i, j in field`)
    assigns first in its body, each one digit of the flat variable: I // s % m + start. When
    their strides and moduli (constants) tile the flat range, the digits together identify the
    iteration. -> their names, or an empty set."""
    digits = []
    for stmt in loop.body:
        if not isinstance(stmt, ir.Assign):
            break
        digit = _digit(stmt.value, loop.var)
        if digit is None:
            break
        digits.append((digit[0], digit[1], stmt.name))
    if not digits:
        return set()
    digits.sort(key=lambda d: -d[0])
    if digits[0][1] is not None or digits[-1][0] != 1:
        return set()
    for (stride, _, _), (next_stride, modulus, _) in zip(digits, digits[1:]):
        if modulus is None or stride != next_stride * modulus:
            return set()
    return {name for _, _, name in digits}


def _digit(expr, var):
    """(stride, modulus or None) of `[cast](I // stride % modulus [+ start])`, or None."""
    while isinstance(expr, ir.Op) and (expr.op == "cast" or (
            expr.op == "add" and not any(isinstance(x, ir.Var) and x.name == var
                                         for x in ir.walk_expr(expr.args[1])))):
        expr = expr.args[0]
    modulus = None
    if isinstance(expr, ir.Op) and expr.op == "mod" and isinstance(expr.args[1], ir.Const):
        modulus, expr = expr.args[1].value, expr.args[0]
    stride = 1
    if isinstance(expr, ir.Op) and expr.op == "floordiv" and isinstance(expr.args[1], ir.Const):
        stride, expr = expr.args[1].value, expr.args[0]
    if isinstance(expr, ir.Var) and expr.name == var and stride > 0 and (modulus or 1) > 0:
        return stride, modulus
    return None


def unproven_fields(kernel: ir.Kernel, replayed: frozenset) -> dict:
    """Fields for which the IR does not prove one launch free of in-launch hazards: a replayed
    read followed by a write that may hit its element (Rules 1 and 2, read during accumulation),
    or two parallel iterations touching one element in conflicting ways.
    -> {field: (reads, writes, by_boxes)}, as lists of Sites: by_boxes says a launch whose
    boxes of these reads and writes are disjoint is free of the hazard; otherwise (writes that
    may collide) only an element check tells."""
    by_field: dict = {}
    for site in access_sites(kernel):
        if site.field.role == "primal":
            by_field.setdefault(site.field, []).append(site)
    out = {}
    for fld, sites in by_field.items():
        writes = [s for s in sites if not isinstance(s.node, ir.Load)]
        if not writes:
            continue
        if not _parallel_safe(writes):
            out[fld] = ([], writes, False)
        elif not _parallel_safe(sites):      # another iteration may read what one writes
            out[fld] = ([s for s in sites if isinstance(s.node, ir.Load)], writes, True)
        elif not _order_safe(sites, replayed):   # a replayed read, then a write
            out[fld] = ([s for s in sites if isinstance(s.node, ir.Load)
                         and id(s.node) in replayed], writes, True)
    return out


def own_element_overwrites(kernel: ir.Kernel, replayed: frozenset) -> frozenset:
    """The unproven fields (see unproven_fields) whose only in-launch hazard is each parallel
    iteration overwriting its own element after a replayed read of it: a scalar field, every
    access in the body of one parallel loop and in no branch or inner loop, each iteration its
    own element, every replayed read before every write. Then each element's value before the
    launch is what its read saw, and its value after, what the adjoint will replay: comparing
    the two decides Rule 1 for every element, at any size. -> those fields."""
    by_field: dict = {}
    for site in access_sites(kernel):
        if site.field.role == "primal":
            by_field.setdefault(site.field, []).append(site)
    out = set()
    for fld in unproven_fields(kernel, replayed):
        sites = by_field[fld]
        loop = sites[0].loops[0] if sites[0].loops else None
        if fld.element_shape or _parallel_var(loop) is None or any(
                s.loops != (loop,) for s in sites):
            continue
        if not (_parallel_safe(sites) and _one_element_per_iteration(loop, sites)):
            continue
        order = [isinstance(s.node, ir.Load) and id(s.node) in replayed for s in sites]
        writes = [i for i, s in enumerate(sites) if not isinstance(s.node, ir.Load)]
        if any(i > writes[0] for i, is_read in enumerate(order) if is_read):
            continue
        if all(id(s.node) in unconditional_nodes(loop) for s in sites):
            out.add(fld)
    return frozenset(out)


def unconditional_nodes(loop: ir.For) -> set:
    """id() of the loads and stores the loop's body runs in every iteration (not in a branch or
    an inner loop)."""
    found = set()
    for stmt in loop.body:
        if ir.child_blocks(stmt):
            continue
        if isinstance(stmt, (ir.Store, ir.AtomicOp)):
            found.add(id(stmt))
        for e in ir.stmt_exprs(stmt):
            found.update(id(x) for x in ir.walk_expr(e) if isinstance(x, ir.Load))
    return found


def _order_safe(sites, replayed) -> bool:
    """Every write comes before every replayed read in program order, and no loop repeats a
    write after such a read, except a parallel loop where each iteration has its own element."""
    order = list(sites)
    last_write = max(i for i, s in enumerate(order) if not isinstance(s.node, ir.Load))
    replayed_sites = [s for s in order if isinstance(s.node, ir.Load) and id(s.node) in replayed]
    if any(order.index(s) < last_write for s in replayed_sites):
        return False
    for r in replayed_sites:
        for w in (s for s in order if not isinstance(s.node, ir.Load)):
            for loop in set(map(id, r.loops)) & set(map(id, w.loops)):
                enclosing = next(lp for lp in r.loops if id(lp) == loop)
                inside = [s for s in sites if any(lp is enclosing for lp in s.loops)]
                if not _one_element_per_iteration(enclosing, inside):
                    return False
    return True


def _parallel_safe(sites) -> bool:
    """Inside each parallel loop, the accesses to one field cannot conflict across iterations:
    only reads, only one commutative atomic kind with no read, or each iteration its own
    element."""
    loops = {id(s.loops[0]): s.loops[0] for s in sites if s.loops and _parallel_var(s.loops[0])}
    for loop in loops.values():
        inside = [s for s in sites if s.loops and s.loops[0] is loop]
        kinds = {type(s.node).__name__ if not isinstance(s.node, ir.AtomicOp)
                 else "atomic_" + s.node.op for s in inside}
        if kinds <= {"Load"} or (len(kinds) == 1 and kinds <= {"atomic_" + op
                                                                 for op in ir.ATOMIC_OPS}):
            continue
        if kinds <= {"atomic_add", "atomic_sub"}:
            continue
        if not _one_element_per_iteration(loop, inside):
            return False
    return True
