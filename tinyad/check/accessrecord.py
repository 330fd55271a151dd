"""The checked variant: the check of one launch's accesses to some fields, element by element,
in either mode (the interpreter walks the variant, fast mode compiles it): the launch runs a
variant of the kernel that also records each access to those fields, and the records, read as a
trail (tinyad/check/trail.py), decide the rules the launch broke within itself. For kernels
whose hazards neither the IR nor the indices alone settle (a scatter through indices computed
from floats, an access in a branch or a loop of unknown length). `kernel.checked.ir` shows the
variant for every field the IR leaves open (`checked_ir`).

The variant is an IR -> IR transform: before each statement that accesses a recorded field, it
stores which element the access touches (its flat index) and, for a read the adjoint replays,
the value it reads, and for a store, the value it stores. Two layouts:

  * columns, for a top-level parallel loop of known length whose accesses are in inner loops of
    known length: `index[iteration, column]` (-1 where the site did not run: a branch not
    taken), a column per site and inner iteration; no synchronisation between iterations;
  * a trail, for the rest (accesses outside parallel loops, in loops of unknown length): each
    access takes the next row of `entries` with an atomic add on a cursor, and writes (segment,
    iteration, site, element) there and its value into `values`. A launch that needs more rows
    than there are is run again, on the fields' values from before it, with room for all.

Up to MAX_ENTRIES records a launch; past that the launch is said unchecked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from tinyad.analysis.queries import live_locals
from tinyad.analysis.sites import access_sites
from tinyad.check import trail as trails
from tinyad.check.facts import kernel_facts
from tinyad.check.hazards import unproven_fields
from tinyad.check.trail import SERIAL, Trail, TrailSite
from tinyad.core import ir
from tinyad.core import types as T

MAX_ENTRIES = 1 << 22       # records a launch may take (32 MiB of indices); past it, unchecked
FIRST_ROOM = 1 << 12        # trail rows at first (it grows to what a launch needed)


@dataclass(eq=False)
class RecordArray:
    """An array the recording variant writes (a kernel parameter, not a user field)."""
    name: str
    shape: tuple
    dtype: T.DType
    element_shape: tuple = ()
    role: str = "record"
    grad = None
    host_array: np.ndarray = field(default=None, repr=False)

    def __post_init__(self):
        self.host_array = np.zeros(self.shape, self.dtype.np)


class Columns:
    """The column layout of one top-level parallel loop (segment `segment`)."""

    def __init__(self, name: str, segment: int, loop: ir.For, sites: list, numbers: list):
        self.segment, self.loop, self.numbers = segment, loop, numbers
        self.start = loop.start.value
        trip = max(loop.stop.value - self.start, 0)
        self.width = [_trip(s.loops[1:]) for s in sites]       # columns per site
        self.base = np.r_[0, np.cumsum(self.width)].astype(np.int64)
        self.index = RecordArray(f"_touched_{name}", (trip, int(self.base[-1])), T.i64)
        self.value = RecordArray(f"_read_{name}", (trip, int(self.base[-1])), T.f64)
        self.column_site = np.repeat(np.asarray(numbers, np.int64), self.width)
        # the columns in the order an iteration makes its accesses (a site in an inner loop
        # runs once per pass: a later statement's first pass comes before an earlier one's
        # second), which the trail's order within an iteration is
        keys = []
        for a, site in enumerate(sites):
            template = _path_in(loop, site.node)
            trips = [_trip((inner,)) for inner in site.loops[1:]]
            for m in range(self.width[a]):
                passes = iter(np.unravel_index(m, trips) if trips else ())
                keys.append(tuple(int(next(passes)) if x is None else x for x in template)
                            + (numbers[a],))
        order = np.array(sorted(range(len(keys)), key=keys.__getitem__), np.int64)
        in_place = bool(np.array_equal(order, np.arange(order.size)))
        self.in_order = None if in_place else order     # (most often: no inner loop)
        if not in_place:
            self.column_site = self.column_site[order]

    def stores(self, k: int, site, flat, value) -> list:
        """index[iteration, column] = flat (and value[iteration, column] = value); the column
        is site k's, offset by its inner loops' iteration."""
        loc = site.node.loc
        iteration = ir.Var(self.loop.var, T.i32, loc)
        if self.start:
            iteration = _op("sub", iteration, ir.Const(self.start, T.i32, loc), loc=loc)
        column = ir.Const(int(self.base[k]), T.i32, loc)
        if site.loops[1:]:
            inner = ir.Const(0, T.i32, loc)
            for loop in site.loops[1:]:
                inner = _op("add", _op("mul", inner, ir.Const(_trip((loop,)), T.i32, loc)),
                            _op("sub", ir.Var(loop.var, T.i32, loc), loop.start, loc=loc),
                            loc=loc)
            column = _op("add", column, inner, loc=loc)
        out = [ir.Store(self.index, (iteration, column), flat, loc)]
        if value is not None:
            out.append(ir.Store(self.value, (iteration, column), value, loc))
        return out

    def entries(self, host) -> tuple:
        """(segment, iteration, site, flat, value) of the accesses made, iteration-major."""
        index, value = host(self.index), host(self.value)
        if self.in_order is not None:
            index, value = index[:, self.in_order], value[:, self.in_order]
        rows, columns = np.nonzero(index >= 0)
        n = rows.size
        return (np.full(n, self.segment, np.int64), rows.astype(np.int64) + self.start,
                self.column_site[columns], index[rows, columns], value[rows, columns])


class Rows:
    """The trail layout: rows taken with an atomic cursor, by every access not in columns."""

    def __init__(self, name: str):
        self.cursor = RecordArray(f"_cursor_{name}", (1,), T.i64)
        self.room = FIRST_ROOM
        self.rows = RecordArray(f"_entries_{name}", (self.room, 4), T.i64)
        self.values = RecordArray(f"_values_{name}", (self.room,), T.f64)
        self.used = False
        self.taken = 0

    def stores(self, number: int, segment: int, iteration, flat, value, loc) -> list:
        """row = the cursor's next; if it is within the room, the row gets (segment, iteration,
        site, flat) and the value (read, or stored)."""
        self.used = True
        row = f"_row{number}"
        at = ir.Var(row, T.i64, loc)
        one = ir.Const(1, T.i64, loc)
        take = ir.AtomicOp("add", self.cursor, (ir.Const(0, T.i32, loc),), one, row, loc)
        fill = [ir.Store(self.rows, (at, ir.Const(c, T.i32, loc)), x, loc) for c, x in
                enumerate((ir.Const(segment, T.i64, loc), iteration,
                           ir.Const(number, T.i64, loc), flat))]
        if value is not None:
            fill.append(ir.Store(self.values, (at,), value, loc))
        room = _op("lt", at, ir.Const(self.room, T.i64, loc), dtype=T.i32, loc=loc)
        return [take, ir.If(room, tuple(fill), (), loc)]

    def grow(self, rows: int) -> None:
        """Room for `rows` rows from the next launch on: new arrays (a device keeps copies of
        the old ones), and the room is in the compiled code, so the caller builds the variant
        again."""
        self.room = 1 << max(int(math.ceil(math.log2(max(rows, 1)))), 12)
        self.rows = replace(self.rows, shape=(self.room, 4))
        self.values = replace(self.values, shape=(self.room,))

    def entries(self, host) -> tuple:
        """The rows taken, ordered by segment and iteration (a row's number keeps program order
        within an iteration: one thread runs an iteration, taking rows in order)."""
        n = min(self.taken, self.room)
        rows, values = host(self.rows)[:n], host(self.values)[:n]
        order = np.lexsort((np.arange(n), rows[:, 1], rows[:, 0]))
        rows = rows[order]
        return rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3], values[order]


def checked_ir(traced) -> ir.Kernel:
    """A traced kernel's checked variant as `kernel.checked.ir` shows it (a memo of `traced`):
    the recording of every field its IR leaves open (check/hazards.py), or the kernel itself
    where the IR settles them all (or their records would be too many: the launch is then said
    unchecked). A launch records those of them its index boxes do not settle either
    (tinyad/checkedlaunch.py): these or fewer."""
    kernel, replayed = traced.ir, kernel_facts(traced).replayed
    fields = list(unproven_fields(kernel, replayed))
    recorder = AccessRecorder.of(kernel, fields, replayed) if fields else None
    return kernel if recorder is None else recorder.ir


class AccessRecorder:
    """The recording variant of a kernel for some fields, and its trail after a launch."""

    def __init__(self, kernel: ir.Kernel, sites: list, replayed: frozenset,
                 values: bool = True):
        self.kernel, self.sites = kernel, sites
        self.values = values          # record what replayed reads read (the trail's judge)
        self.trail_sites = [TrailSite(s.field, _kind(s.node), s.node.loc,
                                      isinstance(s.node, ir.Load) and id(s.node) in replayed)
                            for s in sites]
        self.fields = list({id(s.field): s.field for s in sites}.values())
        self.parallel = [_parallel(s) for s in kernel.body]
        self.rows = Rows(kernel.name)
        self.columns: dict = {}       # segment -> its Columns
        for segment, stmt in enumerate(kernel.body):
            mine = [k for k, s in enumerate(sites) if _segment(kernel, s) == segment]
            if mine and self.parallel[segment] and _column_shaped(stmt, [sites[k] for k in mine]):
                self.columns[segment] = Columns(f"{kernel.name}_{segment}", segment, stmt,
                                                [sites[k] for k in mine], mine)
        self.program = None           # compiled on first use (again when the trail grows)
        self.ir = self._variant()

    @classmethod
    def of(cls, kernel: ir.Kernel, fields, replayed: frozenset,
           replayed_only: bool = False) -> "AccessRecorder | None":
        """The recorder of `fields`' accesses (`replayed_only`: of the loads the adjoint
        replays, tinyad/check/readevidence.py), or None where there are none, or its columns
        alone would take more than MAX_ENTRIES records."""
        wanted = {id(f) for f in fields}
        sites = [s for s in access_sites(kernel) if id(s.field) in wanted and (
            not replayed_only or isinstance(s.node, ir.Load) and id(s.node) in replayed)]
        if not sites:
            return None
        recorder = cls(kernel, sites, replayed, values=not replayed_only)
        if sum(c.index.host_array.size for c in recorder.columns.values()) > MAX_ENTRIES:
            return None
        return recorder

    # ---- the variant ---------------------------------------------------------------------------
    def _variant(self) -> ir.Kernel:
        self.temps = 0                # locals holding a recorded store's value
        body = tuple(out for segment, stmt in enumerate(self.kernel.body)
                     for out in self._recorded((stmt,), segment))
        if not self.values:           # only which elements are read: a slice of the kernel
            body = _sliced(body, self.kernel)
        return replace(self.kernel, body=body)

    def _recorded(self, block: tuple, segment: int, seen: frozenset = frozenset()) -> tuple:
        """`block` with each statement's records just before it (an access's indices and
        value, evaluated there, are the ones the statement itself computes). A while loop's
        condition is evaluated again after each pass of its body: recorded there too. A
        recorded store's value goes through a local first, so that it is computed once.
        Without values, a load shared by several statements (a matrix's entries, in each of
        its product's) is recorded at the first that surely runs it: `seen` holds those,
        which a branch's blocks know too, not a loop's body (which may change its indices)."""
        out, seen = [], set(seen)
        for stmt in block:
            stored = None
            if isinstance(stmt, ir.Store) and any(s.node is stmt for s in self.sites):
                self.temps += 1
                stored = ir.Var(f"_stored{self.temps}", stmt.value.dtype, stmt.loc)
                out.append(ir.Assign(stored.name, stmt.value, stmt.loc))
            out.extend(self._records_of(stmt, segment, stored, seen))
            below = frozenset(seen) if isinstance(stmt, ir.If) else frozenset()
            inner = [self._recorded(b, segment, below) for b in ir.child_blocks(stmt)]
            if isinstance(stmt, ir.While):
                inner[0] = inner[0] + tuple(self._records_of(stmt, segment))
            out.append(ir.with_blocks(stmt, inner) if stored is None
                       else replace(stmt, value=stored))
        return tuple(out)

    def _records_of(self, stmt, segment: int, stored=None, seen=None) -> list:
        guarded = []      # [(select path, records)] of the accesses inside the statement
        for k, site in enumerate(self.sites):
            if site.node is stmt:
                guarded.append(([], self._record(k, site, segment, stored)))
                continue
            if seen is not None and k in seen:
                continue
            for e in ir.stmt_exprs(stmt):
                path = _select_path(e, site.node)
                if path is not None:
                    guarded.append((path, self._record(k, site, segment, stored)))
                    if not path and not self.values and seen is not None:
                        seen.add(k)
                    break
        return _guarded(guarded)

    def _record(self, k: int, site, segment: int, stored) -> list:
        node, loc = site.node, site.node.loc
        dims = tuple(site.field.shape) + tuple(site.field.element_shape)
        flat, const = None, 0          # (constant indices, a matrix's entry, folded in)
        for index, extent in zip(node.indices, dims):
            const *= extent
            if flat is not None:
                flat = _op("mul", flat, ir.Const(extent, T.i64, loc))
            if isinstance(index, ir.Const):
                const += int(index.value)
                continue
            term = _cast(index, T.i64)
            flat = term if flat is None else _op("add", flat, term)
        if flat is None or const:
            constant = ir.Const(const, T.i64, loc)
            flat = constant if flat is None else _op("add", flat, constant)
        value = None
        if self.trail_sites[k].replayed and self.values:
            value = _cast(node, T.f64)
        elif isinstance(node, ir.Store):      # what the element holds after the store
            value = _cast(_cast(stored, node.field.dtype), T.f64)
        columns = self.columns.get(segment)
        if columns is not None:
            return columns.stores(columns.numbers.index(k), site, flat, value)
        loop = self.kernel.body[segment]
        iteration = (_op("cast", ir.Var(loop.var, T.i32, loc), dtype=T.i64)
                     if self.parallel[segment] else ir.Const(SERIAL, T.i64, loc))
        return self.rows.stores(k, segment, iteration, flat, value, loc)

    # ---- one launch ----------------------------------------------------------------------------
    def run(self, storage, scalars, rng, prepare):
        """Run the variant as the launch -> its result (`prepare` compiles it, once, and again
        when the trail grows). If the trail had too little room, the fields the kernel writes
        and the random stream are put back and the launch runs again with room enough."""
        if self.program is None:
            self.program = prepare(self.ir)
        written = ir.fields_written(self.kernel.body) if self.rows.used else ()
        saved = [(f, storage.snapshot(f)) for f in written]
        state = rng.bit_generator.state
        while True:
            self._clear(storage)
            result = self.program.run(scalars, rng)
            if not self.rows.used:
                return result
            self.rows.taken = int(storage.to_host(self.rows.cursor)[0])
            if self.rows.taken <= self.rows.room or self.rows.taken > MAX_ENTRIES:
                return result
            for f, values in saved:
                storage.restore(f, values)
            rng.bit_generator.state = state
            self.rows.grow(self.rows.taken)
            self.ir = self._variant()
            self.program = prepare(self.ir)

    def _clear(self, storage) -> None:
        for columns in self.columns.values():
            storage.assign(columns.index, -1)
        if self.rows.used:
            storage.assign(self.rows.cursor, 0)

    @property
    def complete(self) -> bool:
        """Whether the last launch's trail holds every access (not past MAX_ENTRIES)."""
        return self.rows.taken <= self.rows.room

    def trail(self, host) -> Trail:
        parts = [c.entries(host) for c in self.columns.values()]
        if self.rows.used:
            parts.append(self.rows.entries(host))
        segment, iteration, site, flat, value = (np.concatenate(x) for x in zip(*parts))
        order = np.argsort(segment, kind="stable")      # (each part is in order already)
        return Trail(self.trail_sites, self.parallel, segment[order], iteration[order],
                     site[order], flat[order], value[order])

    def violations(self, launch, host, every: bool) -> list:
        """After the launch: the rule errors its trail shows (tinyad/check/trail.py)."""
        return trails.violations(self.trail(host), launch, self.fields, host, every)


def _path_in(stmt, node) -> list | None:
    """Where `node` runs within `stmt`'s blocks, as a key that sorts in the order of a run:
    (block, position) down to the statement that holds it, then 0 where `node` is in that
    statement's own expressions (an If's condition, a loop's bounds: they run first) or 1 and
    the path on within its blocks; and None after each loop on the way, where that loop's
    pass goes."""
    for b, block in enumerate(ir.child_blocks(stmt)):
        for p, inner in enumerate(block):
            if inner is node or any(x is node for e in ir.stmt_exprs(inner)
                                    for x in ir.walk_expr(e)):
                return [b, p, 0]
            below = _path_in(inner, node)
            if below is not None:
                loop = [None] if isinstance(inner, (ir.For, ir.While)) else []
                return [b, p, 1, *loop, *below]
    return None


def _sliced(body: tuple, kernel: ir.Kernel) -> tuple:
    """The variant without what no record, branch or loop bound needs: the stores and atomics
    of the fields the kernel never loads (nothing in the launch reads what they write; their
    loads' records stay), then the locals nothing left reads, and branches and loops left
    empty. A large kernel's arithmetic mostly goes: its variant compiles in about its time."""
    loaded = {id(x.field) for s in ir.walk_stmts(kernel.body) for e in ir.stmt_exprs(s)
              for x in ir.walk_expr(e) if isinstance(x, ir.Load)}
    body = _pruned(body, lambda s: isinstance(s, (ir.Store, ir.AtomicOp)) and
                   s.field.role != "record" and id(s.field) not in loaded and
                   getattr(s, "result", None) is None)
    while True:
        live = live_locals(body)
        pruned = _pruned(body, lambda s: isinstance(s, ir.Assign) and s.name not in live)
        if pruned == body:
            return body
        body = pruned


def _pruned(block: tuple, dropped) -> tuple:
    out = []
    for s in block:
        if dropped(s):
            continue
        blocks = [_pruned(b, dropped) for b in ir.child_blocks(s)]
        if isinstance(s, (ir.If, ir.For)) and not any(blocks):
            continue       # (a While still runs its condition)
        out.append(ir.with_blocks(s, blocks))
    return tuple(out)


def _select_path(expr, node):
    """The `ti.select`s whose chosen operand `node` is in within `expr`, from the outside in, as
    [(condition, whether it is the operand taken when the condition holds)], or None where
    `node` is not in `expr`. The compiled code, as the interpreter, evaluates only the operand
    chosen: a load in the other one reads nothing."""
    if expr is node:
        return []
    args = expr.indices if isinstance(expr, ir.Load) else \
        expr.args if isinstance(expr, ir.Op) else ()
    for k, arg in enumerate(args):
        inner = _select_path(arg, node)
        if inner is not None:
            if isinstance(expr, ir.Op) and expr.op == "select" and k > 0:
                return [(expr.args[0], k == 1), *inner]
            return inner
    return None


def _guarded(guarded: list) -> list:
    """The records of [(select path, records)], each made only where the selects of its path
    chose the operand holding its access: one If per select, whose condition is evaluated
    once more (the records of the accesses under one select share it; a kernel's selects
    nest deep, and a condition per record made the variant of a large kernel 46 times its
    size). Not where a condition draws a random number, which would change the launch's
    stream: there the access is recorded as if made."""
    out, held = [], {}     # id(select condition) -> [taken records, other records, the cond]
    for path, records in guarded:
        if not path or any(isinstance(x, ir.Op) and x.op == "random"
                           for cond, _ in path for x in ir.walk_expr(cond)):
            out.extend(records)
            continue
        (cond, taken), rest = path[0], path[1:]
        entry = held.get(id(cond))
        if entry is None:
            entry = held[id(cond)] = [[], [], cond]
            out.append(entry)          # (its If, built below, keeps the records' order)
        entry[0 if taken else 1].append((rest, records))
    return [ir.If(x[2], tuple(_guarded(x[0])), tuple(_guarded(x[1])), x[2].loc)
            if isinstance(x, list) else x for x in out]


def _segment(kernel: ir.Kernel, site) -> int:
    """Which top-level statement of the kernel holds the site."""
    outer = site.loops[0] if site.loops else None
    for n, stmt in enumerate(kernel.body):
        if stmt is outer or stmt is site.node or any(
                x is site.node for s in ir.walk_stmts((stmt,)) for x in _nodes(s)):
            return n
    raise AssertionError("an access outside the kernel's body")


def _nodes(stmt):
    yield stmt
    for e in ir.stmt_exprs(stmt):
        yield from ir.walk_expr(e)


def _parallel(stmt) -> bool:
    return isinstance(stmt, ir.For) and stmt.parallel


def _column_shaped(loop, sites) -> bool:
    """Whether the loop and every site's inner loops have constant bounds (columns can
    hold them)."""
    return all(s.loops and s.loops[0] is loop for s in sites) and all(
        isinstance(x, ir.For) and isinstance(x.start, ir.Const)
        and isinstance(x.stop, ir.Const) for s in sites for x in s.loops)


def _trip(loops) -> int:
    """How many times the innermost of these constant-bound loops runs its body."""
    count = 1
    for loop in loops:
        count *= max(loop.stop.value - loop.start.value, 0)
    return count


def _kind(node) -> str:
    if isinstance(node, ir.Load):
        return "read"
    if isinstance(node, ir.Store):
        return "store"
    return "atomic_" + node.op


def _cast(value: ir.Expr, dtype) -> ir.Expr:
    return value if value.dtype == dtype else _op("cast", value, dtype=dtype)


def _op(name, *args, dtype=None, loc=None):
    loc = loc if loc is not None else args[0].loc
    return ir.Op(name, tuple(args), dtype or args[0].dtype, loc)
