"""The indices a launch certainly touches, where its IR settles them: a bounds check fast mode
makes once per kernel and argument values, before the launch.

Fast mode does not check indices element by element (`ti.init(debug=True)` does, and interp
mode always): an index past a field's end reads or writes memory the field does not own, on
the CPU another array's values or a crash, and a gradient computed from them is wrong without
a word. Most such bugs are a time step one past the end (`x[t + 1, i]` launched with
t = steps - 1), and those need no per-element check. Where an access is reached in every
iteration of its loops (no branch, `while` or `break` around it), its loops' bounds are set by
constants and integer arguments, and each of its indices adds loop variables, arguments and
constants (times constants, floor-divided by constants, modulo a constant where the operand
runs through at least that many consecutive values; through integer locals assigned once: a
flattened ndrange's I // n and I % n), each loop variable at most once, the two ends of the
index's interval over the launch are indices that some iteration touches: an end outside the
field is an access out of bounds, certainly. tinyad/check/regions.py asks this of every access when
it plans a launch, and checked fast mode raises the bounds error interp mode would, naming the
access's line, before the launch runs; compile/backend.py asks the same of an adjoint launched
with no forward launch alike before it (a manual sweep one step too long).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tinyad.analysis.queries import assigned, direct_break
from tinyad.analysis.sites import access_sites, fixed_int_args
from tinyad.core import ir


class CertainBounds:
    """One kernel's accesses whose index ends are certain (see the module), and which of them
    a launch reaches outside its field: for a kernel's primal, once per launch plan
    (tinyad/check/regions.py); for its adjoint, at a `.grad()` of a launch that never ran."""

    def __init__(self, kernel: ir.Kernel, sites=None):
        self.args = fixed_int_args(kernel)
        names = [a.name for a in kernel.args]
        self.positions = tuple(names.index(n) for n in self.args)
        reached, changed = reached_nodes(kernel), {}
        self.ends = [(site, ends) for site in (sites or access_sites(kernel))
                     if id(site.node) in reached
                     and (ends := index_ends_function(site, self.args, changed)) is not None]

    def outside(self, scalars: tuple):
        """(site, dimension, index) of the first access a launch with these scalar arguments
        certainly makes outside its field, or None."""
        return self.outside_at(tuple(int(scalars[i]) for i in self.positions))

    def outside_at(self, values: tuple):
        """The same, given the integer arguments' values (in `args` order)."""
        for site, ends in self.ends:
            touched = ends(*values)
            for dim, ((low, high), size) in enumerate(zip(touched or (), site.field.shape)):
                if low < 0 or high >= size:
                    return site, dim, low if low < 0 else high
        return None


def reached_nodes(kernel: ir.Kernel) -> frozenset:
    """ids of the access nodes (Load, Store, AtomicOp) that every iteration of the loops around
    them reaches: not inside a branch or a `while`, nor in a loop that may `break`."""
    found = set()

    def visit(block):
        for s in block:
            if isinstance(s, ir.Assert):     # (evaluated only with debug=True)
                continue
            for e in ir.stmt_exprs(s):       # (an `if`'s condition, a loop's bounds included)
                found.update(id(x) for x in ir.walk_expr(e) if isinstance(x, ir.Load))
            if isinstance(s, (ir.Store, ir.AtomicOp)):
                found.add(id(s))
            elif isinstance(s, ir.For) and not direct_break(s.body):
                visit(s.body)       # (a Return stands only last, at the kernel's top level)

    visit(kernel.body)
    return frozenset(found)


class _Ends(NamedTuple):
    """What is known of an integer expression over a launch: its lowest and highest values (as
    Python source), both taken in some iteration; the loop variables it depends on; and whether
    it takes every integer between them (`dense`: a loop variable does, 2 * i does not)."""
    low: str
    high: str
    loops: frozenset = frozenset()
    dense: bool = True


def index_ends_function(site, args: tuple, changed: dict | None = None):
    """For an access `reached_nodes` holds whose indices are exact (see the module): a
    function of the integer arguments `args` (in that order) -> ((lowest, highest) index the
    launch touches, per dimension of the field), or None when a loop around it is empty (or
    its ends cannot be told for these arguments). None instead of a function when the access
    is not such. `changed`: id(loop) -> the locals its body assigns, remembered across calls
    on one kernel (a kernel's sites share its loops)."""
    lines = _ends_source(site, args, {} if changed is None else changed)
    if lines is None:
        return None
    namespace: dict = {}
    exec("\n".join(lines), namespace)   # noqa: S102  (source built above from the IR)
    return namespace["ends"]


def _ends_source(site, args: tuple, changed: dict) -> list | None:
    """index_ends_function's source lines, or None."""
    if not site.field.shape:
        return None
    lines = [f"def ends({', '.join('a_' + n for n in args)}):"]
    env = {n: _Ends(f"a_{n}", f"a_{n}") for n in args}    # (an argument is one value)
    guards: list = []      # conditions the ends hold under (else the function says None)
    for k, loop in enumerate(site.loops):
        if not isinstance(loop, ir.For):
            return None
        start, stop = _exact(loop.start, env, guards), _exact(loop.stop, env, guards)
        if id(loop) not in changed:
            changed[id(loop)] = assigned(loop.body)
        if start is None or stop is None or start.loops or stop.loops or \
                loop.var in changed[id(loop)]:
            return None        # bounds that a loop variable moves, or a variable changed
        lines.append(f"    l{k} = {start.low}; h{k} = {stop.low} - 1")
        lines.append(f"    if h{k} < l{k}: return None")
        env[loop.var] = _Ends(f"l{k}", f"h{k}", frozenset([loop.var]))
        # the integer locals the body assigns once (a flattened ndrange's I // n, I % n)
        for name, value in site.preludes.get(id(loop), ()):
            found = _exact(value, env, guards)
            if found is not None:
                env[name] = found
    ends = []
    for expr in site.indices[:len(site.field.shape)]:
        found = _exact(expr, env, guards)
        if found is None:
            return None
        ends.append(f"({found.low}, {found.high})")
    lines.extend(f"    if not ({guard}): return None" for guard in guards)
    lines.append(f"    return ({''.join(e + ', ' for e in ends)})")
    return lines


def _exact(expr, env: dict, guards: list) -> _Ends | None:
    """What is known of an integer IR expression (an `_Ends`), or None where its interval's
    ends may be values it never takes. `guards` gathers the conditions on the arguments that
    some ends need."""
    if isinstance(expr, ir.Const):
        return _Ends(str(int(expr.value)), str(int(expr.value))) if expr.dtype.is_int else None
    if isinstance(expr, ir.Var):
        return env.get(expr.name)
    if not isinstance(expr, ir.Op) or not expr.dtype.is_int:
        return None
    op, args = expr.op, expr.args
    if op in ("cast", "pos"):
        return _exact(args[0], env, guards)
    if op == "neg":
        a = _exact(args[0], env, guards)
        return None if a is None else _Ends(f"-({a.high})", f"-({a.low})", a.loops, a.dense)
    if len(args) != 2:
        return None
    if op == "mul" and _int_const(args[0]):
        args = args[::-1]                # (the constant second)
    if op in ("mul", "floordiv", "mod") and _int_const(args[1]):
        a, c = _exact(args[0], env, guards), int(args[1].value)
        if a is None or (op != "mul" and c <= 0):
            return None
        if op == "mod":     # every residue, where `a` takes c consecutive values or more
            if not a.dense:
                return None
            guards.append(f"({a.high}) - ({a.low}) >= {c - 1}")
            return _Ends("0", str(c - 1), a.loops)
        symbol = "*" if op == "mul" else "//"   # (both monotone in a: its ends map to ends)
        low, high = f"({a.low}) {symbol} {c}", f"({a.high}) {symbol} {c}"
        dense = a.dense and (op == "floordiv" or abs(c) <= 1)
        return _Ends(low, high, a.loops, dense) if c >= 0 else _Ends(high, low, a.loops, dense)
    if op in ("add", "sub"):
        a, b = _exact(args[0], env, guards), _exact(args[1], env, guards)
        if a is None or b is None or a.loops & b.loops:   # (i - i: not the ends of i's)
            return None
        loops, dense = a.loops | b.loops, a.dense and b.dense
        if op == "add":
            return _Ends(f"{a.low} + {b.low}", f"{a.high} + {b.high}", loops, dense)
        return _Ends(f"{a.low} - ({b.high})", f"{a.high} - ({b.low})", loops, dense)
    return None


def _int_const(expr) -> bool:
    return isinstance(expr, ir.Const) and expr.dtype.is_int


class IndexProof:
    """Which accesses of a kernel compiled code must check element by element: those whose
    indices the IR cannot bound (fast mode's bad-index flag, compile/badindex.py).

    An access needs no check when every index it can take is inside the field, whatever the
    launch's arguments: interval arithmetic over constants, loop ranges and the integer locals
    a loop assigns once. Nor does one that `CertainBounds` can settle before
    each launch (reached in every iteration, ends exact in the integer arguments): those are
    `launch_sites`, which the launcher checks once per argument values. Every other access
    (an index read from a field, computed from a float, a local assigned twice, a `while`'s
    counter, i - 1 under `if i > 0`) is `guarded`: the ids of its index tuples (`rank`: the
    most indices one of them has; `guarded_sites`: the accesses). tinyad/check/checkpoints.py
    `IndexChecks` replaces some of those guards by one range check per loop body."""

    def __init__(self, kernel: ir.Kernel, everything: bool = False):
        args = fixed_int_args(kernel)
        reached = reached_nodes(kernel)
        self.restored = {s.name for s in ir.walk_stmts(kernel.body)
                         if isinstance(s, ir.Restore)}
        guarded, launch_sites = [], []
        self.changed: dict = {}              # id(loop) -> the locals its body assigns
        for site in access_sites(kernel):
            if not site.indices:
                continue
            if everything:
                guarded.append(site)
                continue
            env = self.intervals(site)
            if env is None or _inside_all(site, env, 0):
                continue                     # (a loop around it never runs)
            if (id(site.node) in reached and _inside_all(site, env, len(site.field.shape))
                    and _ends_source(site, args, self.changed) is not None):
                launch_sites.append(site)
            else:
                guarded.append(site)
        self.guarded_sites = guarded
        self.guarded = frozenset(id(site.indices) for site in guarded)
        self.rank = max((len(site.indices) for site in guarded), default=0)
        self.launch_sites = launch_sites

    def intervals(self, site) -> dict | None:
        """The intervals of the loop variables and once-assigned locals around `site`."""
        return _loop_intervals(site, self.restored, self.changed)


def _inside_all(site, env: dict, start: int) -> bool:
    """Are the access's indices from position `start` on (past the field's own: a vector's
    component) inside their extents, over the intervals `env`?"""
    sizes = (*site.field.shape, *site.field.element_shape)
    return all(_inside(_interval(e, env), n)
               for e, n in zip(site.indices[start:], sizes[start:]))


def _inside(span, size: int) -> bool:
    return span is not None and 0 <= span[0] and span[1] < size


def _loop_intervals(site, restored, changed: dict) -> dict | None:
    """{local: (lowest, highest) or None} for the loop variables around `site` and the integer
    locals their bodies assign once (not one a Restore also assigns); None when some loop
    around it never runs. `changed` remembers each loop's assigned locals."""
    env: dict = {}
    for loop in site.loops:
        if not isinstance(loop, ir.For):
            continue                     # (a `while` binds nothing)
        start, stop = _interval(loop.start, env), _interval(loop.stop, env)
        if start is not None and stop is not None and stop[1] - 1 < start[0]:
            return None
        if id(loop) not in changed:
            changed[id(loop)] = assigned(loop.body)
        bounded = start is not None and stop is not None and loop.var not in changed[id(loop)]
        env[loop.var] = (start[0], stop[1] - 1) if bounded else None
        for name, value in site.preludes.get(id(loop), ()):
            env[name] = None if name in restored else _interval(value, env)
    return env


def _interval(expr, env: dict):
    """(lowest, highest) an integer expression can take, or None when unbounded (a float, a
    load, an argument, an op that may wrap around its type)."""
    if isinstance(expr, ir.Const):
        return (int(expr.value),) * 2 if expr.dtype.is_int else None
    if isinstance(expr, ir.Var):
        return env.get(expr.name)
    if not isinstance(expr, ir.Op) or not expr.dtype.is_int:
        return None
    op, raw = expr.op, expr.args
    if op in ("floordiv", "mod") and len(raw) == 2 and _int_const(raw[1]) \
            and int(raw[1].value) > 0:
        a, c = _interval(raw[0], env), int(raw[1].value)
        if a is None:
            return None
        if op == "floordiv":
            return _fits(a[0] // c, a[1] // c, expr.dtype)
        return a if 0 <= a[0] and a[1] < c else (0, c - 1)
    spans = [_interval(a, env) for a in raw]
    if any(s is None for s in spans):
        return None
    if op in ("cast", "pos"):
        return _fits(*spans[0], expr.dtype)
    if op == "neg":
        return _fits(-spans[0][1], -spans[0][0], expr.dtype)
    if len(spans) != 2:
        return None
    (a, b), (c, d) = spans
    if op == "add":
        return _fits(a + c, b + d, expr.dtype)
    if op == "sub":
        return _fits(a - d, b - c, expr.dtype)
    if op in ("min", "max"):
        pick = min if op == "min" else max
        return pick(a, c), pick(b, d)
    if op == "mul":
        products = (a * c, a * d, b * c, b * d)
        return _fits(min(products), max(products), expr.dtype)
    return None


def _fits(low: int, high: int, dtype):
    """(low, high), where the type holds both (else the op may wrap: unbounded)."""
    info = np.iinfo(dtype.np)
    return (low, high) if info.min <= low and high <= info.max else None
