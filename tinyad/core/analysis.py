"""What the backends ask of the IR: which locals a block assigns and reads, which locals need a
first value, which live in one straight-line run, loop trip counts (the code generator); which
loads an adjoint replays, the box of elements each global access may touch as a function of the
launch's integer arguments, and which fields one launch may break a rule on within itself
(fast mode's rule checker, compile/replaycheck.py)."""
from __future__ import annotations

from tinyad.core import ir, printer


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


def zero_locals(kernel: ir.Kernel) -> frozenset:
    """The locals a kernel only ever sets to the constant 0 (PlasticineLab's
    `zero = ti.Vector.zero(...)`, then `grid.grad[I] = zero`)."""
    zero, other = set(), set()
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Assign):
            (zero if is_zero(s.value) else other).add(s.name)
    return frozenset(zero - other)


def is_zero(value: ir.Expr, zeros: frozenset = frozenset()) -> bool:
    """Is `value` the constant 0, or a read of one of the locals `zeros` (zero_locals), maybe
    cast (`f64(zero_0)`)?"""
    while isinstance(value, ir.Op) and value.op == "cast":
        value = value.args[0]
    if isinstance(value, ir.Const):
        return value.value == 0
    return isinstance(value, ir.Var) and value.name in zeros


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


def gradient_resets(kernel: ir.Kernel) -> frozenset:
    """ids of the Store nodes that set a gradient to 0 in a kernel that also stores into the
    field itself (`grid[c] = 0` beside `grid.grad[c] = 0`). The adjoint of overwriting a field
    kills its gradient anyway, so a grad_for function that clears a scratch field it recomputes
    (DiffTaichi's diffmpm clears its grid each step) discards no gradient still owed."""
    stored = {id(s.field) for s in ir.walk_stmts(kernel.body)
              if isinstance(s, ir.Store) and s.field.role == "primal"}
    zeros = zero_locals(kernel)
    return frozenset(id(s) for s in ir.walk_stmts(kernel.body)
                     if isinstance(s, ir.Store) and s.field.role == "grad"
                     and is_zero(s.value, zeros) and id(s.field.primal) in stored)


# ---- regions: which elements an access may touch, as a function of the scalar arguments ------

class Site:
    """One global access (a Load, Store or AtomicOp node) with the loops around it, outer first,
    and for each loop the integer locals its body assigns once (the indices of a flattened
    ndrange, a neighbour's index), which `box` follows."""

    def __init__(self, node, loops: tuple, preludes: dict):
        self.node, self.loops, self.preludes = node, loops, preludes
        self.field, self.indices = node.field, node.indices


def access_sites(kernel: ir.Kernel) -> list:
    """Every global access of a kernel, in program order, as a `Site`."""
    sites, preludes = [], {}
    counts: dict = {}
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Assign):
            counts[s.name] = counts.get(s.name, 0) + 1

    def visit(block, loops):
        for s in block:
            if isinstance(s, (ir.Store, ir.AtomicOp)):
                sites.extend(Site(x, loops, preludes) for e in ir.stmt_exprs(s)
                             for x in ir.walk_expr(e) if isinstance(x, ir.Load))
                sites.append(Site(s, loops, preludes))
                continue
            for e in ir.stmt_exprs(s):
                sites.extend(Site(x, loops, preludes) for x in ir.walk_expr(e)
                             if isinstance(x, ir.Load))
            inner = loops + (s,) if isinstance(s, (ir.For, ir.While)) else loops
            if isinstance(s, ir.For):
                preludes[id(s)] = tuple(_single_int_assigns(s.body, counts))
            for block_ in ir.child_blocks(s):
                visit(block_, inner)
    visit(kernel.body, ())
    return sites


def _single_int_assigns(block, counts: dict):
    """(name, value) of the integer locals a loop body assigns exactly once in the kernel, in
    program order, branches included, inner loops not (theirs are the inner loop's). Taichi
    scopes a local to its block, so wherever one is read its value is that expression, of
    its operands then (a local assigned more than once has no interval: unbounded). A
    bounds-guarded stencil computes its neighbours' indices (j - 1, t - 2) so."""
    for s in block:
        if isinstance(s, ir.Assign) and counts.get(s.name) == 1 and s.value.dtype.is_int:
            yield s.name, s.value
        elif isinstance(s, ir.If):
            for inner in ir.child_blocks(s):
                yield from _single_int_assigns(inner, counts)


def fixed_int_args(kernel: ir.Kernel) -> tuple:
    """The integer scalar arguments no statement reassigns: their launch values hold
    throughout, so a box may depend on them."""
    changed = assigned(kernel.body)
    return tuple(a.name for a in kernel.args if a.dtype.is_int and a.name not in changed)


UNKNOWN = 1 << 62     # an interval end nothing bounds: the final clip makes it the whole dimension


def box_function(site: Site, shape: tuple, args: tuple):
    """A function of the integer arguments `args` (in that order) -> the box ((lo, hi) per
    dimension, hi exclusive, clipped to `shape`) that `site` may touch in that launch, or None
    if it cannot happen (an empty loop around it). Indices are bounded by interval arithmetic
    over loop ranges and arguments (+, -, *, // and % by a constant, min, max); any other
    index (a gather `x[idx[i]]`, a local) spans its whole dimension. Generated as Python
    source once per site, so that a launch pays a few microseconds."""
    lines = [f"def box({', '.join('a_' + n for n in args)}):"]
    env = {n: (f"a_{n}", f"a_{n}") for n in args}
    counter = iter(range(1 << 30))

    def bind(lo, hi):
        k = next(counter)
        lines.append(f"    l{k} = {lo}; h{k} = {hi}")
        return f"l{k}", f"h{k}"

    for loop in site.loops:
        if isinstance(loop, ir.While):
            continue
        start, stop = _interval_src(loop.start, env, bind), _interval_src(loop.stop, env, bind)
        if start is None or stop is None:
            env[loop.var] = None
        else:
            lines.append(f"    if {stop[1]} - 1 < {start[0]}: return None")
            env[loop.var] = bind(start[0], f"{stop[1]} - 1")
        for name, value in site.preludes.get(id(loop), ()):
            env[name] = _interval_src(value, env, bind)
    dims = []
    for expr, size in zip(site.indices, shape):
        span = _interval_src(expr, env, bind)
        if span is None:
            dims.append(f"(0, {size})")
            continue
        lo, hi = bind(f"max(0, {span[0]})", f"min({size}, {span[1]} + 1)")
        lines.append(f"    if {hi} <= {lo}: return None")   # out of bounds: reported elsewhere
        dims.append(f"({lo}, {hi})")
    lines.append(f"    return ({''.join(d + ', ' for d in dims)})")
    namespace: dict = {}
    exec("\n".join(lines), namespace)   # noqa: S102  (source built above from the IR)
    function = namespace["box"]
    # no argument moves it (a weight matrix read in every launch): the same box in every launch
    function.fixed = not any(f"a_{n}" in line for line in lines[1:] for n in args)
    return function


def _interval_src(expr, env, bind):
    """Python expressions (lo, hi) bounding an integer IR expression, or None if unbounded."""
    if isinstance(expr, ir.Const):
        return (str(int(expr.value)),) * 2 if expr.dtype.is_int else None
    if isinstance(expr, ir.Var):
        return env.get(expr.name)
    if not isinstance(expr, ir.Op) or not expr.dtype.is_int:
        return None
    op, raw = expr.op, expr.args
    if op in ("floordiv", "mod") and len(raw) == 2 and isinstance(raw[1], ir.Const) \
            and int(raw[1].value) > 0:
        a = _interval_src(raw[0], env, bind)
        if a is None:
            return None
        c = int(raw[1].value)
        if op == "floordiv":
            return bind(f"({a[0]}) // {c}", f"({a[1]}) // {c}")
        inside = f"0 <= {a[0]} and {a[1]} < {c}"
        return bind(f"({a[0]} if {inside} else (0 if {a[0]} >= 0 else -{UNKNOWN}))",
                    f"({a[1]} if {inside} else ({c - 1} if {a[0]} >= 0 else {UNKNOWN}))")
    args = [_interval_src(a, env, bind) for a in raw]
    if any(a is None for a in args):
        return None
    if op in ("cast", "pos"):
        return args[0]
    if op == "neg":
        return bind(f"-({args[0][1]})", f"-({args[0][0]})")
    if len(args) != 2:
        return None
    (a, b), (c, d) = args
    if op == "add":
        return bind(f"{a} + {c}", f"{b} + {d}")
    if op == "sub":
        return bind(f"{a} - {d}", f"{b} - {c}")
    if op in ("min", "max"):
        return bind(f"{op}({a}, {c})", f"{op}({b}, {d})")
    if op == "mul":
        products = f"{a} * {c}, {a} * {d}, {b} * {c}, {b} * {d}"
        return bind(f"min({products})", f"max({products})")
    return None


def boxes_overlap(a: tuple, b: tuple) -> bool:
    for (lo1, hi1), (lo2, hi2) in zip(a, b):   # (a loop, not all(...): fast mode's checker
        if lo1 >= hi2 or lo2 >= hi1:           # asks at every write of a watched field)
            return False
    return True


def box_contains(outer: tuple, inner: tuple) -> bool:
    return all(lo1 <= lo2 and hi2 <= hi1 for (lo1, hi1), (lo2, hi2) in zip(outer, inner))


# ---- reads and writes of one field within one launch ------------------------------------------

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
