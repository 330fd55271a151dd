"""What the code generator and the transforms ask of the IR: which locals a block assigns and
reads, which locals need a first value, which live in one straight-line run, whether a loop
breaks, loop trip counts and bounds, the global accesses of a block, and which loads an
adjoint replays."""
from __future__ import annotations

from tinyad.core import ir


def assigned(stmts) -> set:
    """Locals a block writes: assignments, loop variables, atomic results, restores."""
    names = set()
    for s in ir.walk_stmts(stmts):
        if isinstance(s, (ir.Assign, ir.Restore)):
            names.add(s.name)
        elif isinstance(s, ir.For):
            names.add(s.var)
        elif isinstance(s, ir.AtomicOp) and s.result:
            names.add(s.result)
    return names


def referenced(stmts) -> set:
    names = assigned(stmts)
    for s in ir.walk_stmts(stmts):
        if isinstance(s, ir.Save):
            names.add(s.name)
        for e in ir.stmt_exprs(s):
            names.update(x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var))
    return names


def direct_break(stmts) -> bool:
    """A `break` that would leave this loop (not one inside an inner loop)."""
    for s in stmts:
        if isinstance(s, ir.Break):
            return True
        if isinstance(s, ir.If) and (direct_break(s.then) or direct_break(s.orelse)):
            return True
    return False


def without(stmts, skip):
    """`stmts` with the statement `skip` (found anywhere inside) left out."""
    out = []
    for s in stmts:
        if s is skip:
            continue
        if isinstance(s, ir.If):
            s = ir.If(s.cond, tuple(without(s.then, skip)), tuple(without(s.orelse, skip)),
                      s.loc)
        elif isinstance(s, ir.For):
            s = ir.For(s.var, s.start, s.stop, tuple(without(s.body, skip)), s.parallel,
                       s.reverse, s.loc)
        elif isinstance(s, ir.While):
            s = ir.While(s.cond, tuple(without(s.body, skip)), s.loc)
        out.append(s)
    return out


def accesses(stmts):
    """(field, indices, statement-or-load) for every global access in a block."""
    out = []
    for s in ir.walk_stmts(stmts):
        if isinstance(s, (ir.Store, ir.AtomicOp)):
            out.append((s.field, s.indices, s))
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Load):
                    out.append((x.field, x.indices, x))
    return out


def reads(stmt) -> set:
    names = {x.name for e in ir.stmt_exprs(stmt) for x in ir.walk_expr(e) if isinstance(x, ir.Var)}
    if isinstance(stmt, ir.Save):
        names.add(stmt.name)
    return names


def maybe_unassigned(stmts, assigned: set) -> set:
    """Locals a block may read before certainly assigning them: they need a first value.
    Assignments in straight-line code count; those inside a branch or loop do not."""
    assigned, risky = set(assigned), set()
    for s in stmts:
        risky |= reads(s) - assigned
        if isinstance(s, ir.If):
            risky |= maybe_unassigned(s.then, assigned) | maybe_unassigned(s.orelse, assigned)
        elif isinstance(s, ir.For):
            risky |= maybe_unassigned(s.body, assigned | {s.var})
        elif isinstance(s, ir.While):
            risky |= maybe_unassigned(s.body, assigned)
        elif isinstance(s, (ir.Assign, ir.Restore)):
            assigned.add(s.name)
        elif isinstance(s, ir.AtomicOp) and s.result:
            assigned.add(s.result)
    return risky


def region_locals(body, args: set) -> set:
    """Locals that live in one straight-line run of statements (no branch or loop in between)
    and are assigned before they are read there. The generator gives each of their assignments
    its own Python name: numba's SSA pass costs (statements x locals assigned more than once),
    which dominates the compile of long adjoint kernels."""
    runs: dict[str, set] = {}
    first_is_def: dict[str, bool] = {}
    counter = iter(range(1 << 62))

    def note(name, run, is_def):
        runs.setdefault(name, set()).add(run)
        first_is_def.setdefault(name, is_def)

    def visit(block):
        run = next(counter)
        for s in block:
            if isinstance(s, (ir.If, ir.For, ir.While)):
                for name in reads(s):
                    note(name, -1, False)
                if isinstance(s, ir.For):
                    note(s.var, -1, True)
                for inner in ir.child_blocks(s):
                    visit(inner)
                run = next(counter)
                continue
            for name in reads(s):
                note(name, run, False)
            if isinstance(s, (ir.Assign, ir.Restore)):
                note(s.name, run, True)
            elif isinstance(s, ir.AtomicOp) and s.result:
                note(s.result, run, True)

    visit(body)
    return {n for n, r in runs.items()
            if len(r) == 1 and -1 not in r and first_is_def[n] and n not in args}


def static_trip(loop: ir.For):
    if isinstance(loop.start, ir.Const) and isinstance(loop.stop, ir.Const):
        return max(0, int(loop.stop.value) - int(loop.start.value))
    return None


def python_bound(e: ir.Expr, args: set) -> bool:
    """Can the driver compute this loop bound in Python (constants and arguments only)?"""
    for x in ir.walk_expr(e):
        if isinstance(x, ir.Load) or (isinstance(x, ir.Var) and x.name not in args):
            return False
        if isinstance(x, ir.Op) and x.op not in ("add", "sub", "mul", "floordiv", "mod", "neg",
                                                 "cast", "min", "max"):
            return False
    return True


def replayed_loads(adjoint: ir.Kernel) -> list:
    """The primal field reads an adjoint kernel replays, in program order. Reverse mode reuses
    the forward's Load nodes, so each is also the forward's read: every one must still see the
    value the forward saw when the adjoint runs (a later write to its element breaks that)."""
    return [sub for stmt in ir.walk_stmts(adjoint.body) for expr in ir.stmt_exprs(stmt)
            for sub in ir.walk_expr(expr) if isinstance(sub, ir.Load) and sub.field.role == "primal"]


def live_locals(body) -> set:
    """Locals read, directly or through other locals' assignments, by a statement that is not
    an assignment."""
    feeds: dict[str, set] = {}          # local -> the locals its assignments read
    live: set = set()
    for s in ir.walk_stmts(body):
        names = {x.name for e in ir.stmt_exprs(s) for x in ir.walk_expr(e)
                 if isinstance(x, ir.Var)}
        if isinstance(s, ir.Assign):
            feeds.setdefault(s.name, set()).update(names)
        else:
            live |= names
    work = list(live)
    while work:
        for name in feeds.get(work.pop(), ()):
            if name not in live:
                live.add(name)
                work.append(name)
    return live
