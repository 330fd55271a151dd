"""Fast mode's check of one launch's accesses to a field, element by element, at compiled speed:
for kernels too large for the interpreter whose hazards neither the IR nor the indices alone
settle (a scatter through indices computed from floats, an access in a branch).

The launch runs a variant of the kernel that also records, for every access to the field in a
parallel loop, which element it touched: `index[iteration, column]` = the element's flat index
(-1 where the site did not run: a branch not taken; a column per site, or per site and inner
iteration), and for each read the adjoint replays, the value it read (`value[iteration,
column]`). A compiled scan then reads the records as the interpreter reads its access log
(interp/lanelog.py):

  * an element two iterations touch, one of them storing, or in two different ways (a read and
    an atomic add, an add and a min): the iterations' order decides the result, the
    interpreter's ParallelConflictRuleError;
  * a replayed read whose element holds another value when the launch ends: its own iteration
    changed it after reading it (another iteration's change is a conflict, found first): Rule 1,
    or Rule 2 where a store came before the read, or a read during accumulation where adds came
    before it and after it, as the interpreter names them.

Only accesses in the kernel's top-level parallel loops, and in inner loops with constant
bounds (a site's column block has one column per inner iteration), can be recorded, up to
MAX_ENTRIES records a launch; other kernels stay unchecked within the launch, and are said to
be.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numba import njit

from tinyad.check import rules
from tinyad.check.report import ACCUMULATE, SLOTS, Access
from tinyad.core import analysis, ir
from tinyad.core import types as T

MAX_ENTRIES = 1 << 22       # records a launch may take (32 MiB of indices); past it, unchecked


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


class LoopRecords:
    """The records of one top-level parallel loop's accesses to the recorded fields. A site in
    inner loops (constant bounds) gets a block of columns, one per inner iteration."""

    def __init__(self, name: str, loop: ir.For, sites: list, replayed: frozenset):
        self.loop, self.sites, self.start = loop, sites, loop.start.value
        trip = max(loop.stop.value - self.start, 0)
        self.kinds = [_kind(s.node, replayed) for s in sites]
        self.reads = [k for k, (_, again) in enumerate(self.kinds) if again]
        self.width = [_trip(s.loops[1:]) for s in sites]      # columns per site
        self.base = np.r_[0, np.cumsum(self.width)].astype(np.int64)
        self.value_base = {}
        for k in self.reads:
            self.value_base[k] = sum(self.width[j] for j in self.value_base)
        width = int(self.base[-1])
        self.index = RecordArray(f"_touched_{name}", (trip, width), T.i64)
        self.value = RecordArray(f"_read_{name}", (trip, max(sum(
            self.width[k] for k in self.reads), 1)), T.f64)
        self.site_of = np.repeat(np.arange(len(sites)), self.width)   # column -> site
        self.slots = np.array([SLOTS[self.kinds[k][0]] for k in self.site_of], np.int8)
        self.columns = {}                # field -> its sites' columns
        for k, site in enumerate(sites):
            self.columns.setdefault(site.field, []).extend(
                range(self.base[k], self.base[k + 1]))
        self.columns = {f: np.array(c, np.int64) for f, c in self.columns.items()}

    def recorded_loop(self) -> ir.For:
        return replace(self.loop, body=self._recorded(self.loop.body))

    def _recorded(self, block: tuple) -> tuple:
        """`block` with the records of each statement's accesses just before it (an access's
        indices and value, evaluated there, are the ones the statement itself computes)."""
        out = []
        for stmt in block:
            for k, site in enumerate(self.sites):
                if site.node is stmt or any(site.node is x for e in ir.stmt_exprs(stmt)
                                            for x in ir.walk_expr(e)):
                    out.extend(self._record_stores(k, site))
            out.append(ir.with_blocks(stmt, [self._recorded(b) for b in ir.child_blocks(stmt)]))
        return tuple(out)

    def _record_stores(self, k: int, site) -> list:
        """index[iteration, column] = the flat index of the element `site` touches (and, for a
        replayed read, value[iteration, column] = what it reads); the column is the site's,
        offset by the inner loops' iteration."""
        node, loc = site.node, site.node.loc
        dims = tuple(site.field.shape) + tuple(site.field.element_shape)
        flat = ir.Const(0, T.i64, loc)
        for index, extent in zip(node.indices, dims):
            flat = _op("add", _op("mul", flat, ir.Const(extent, T.i64, loc)),
                       _op("cast", index, dtype=T.i64), loc=loc)
        iteration = _op("sub", ir.Var(self.loop.var, T.i32, loc),
                        ir.Const(self.start, T.i32, loc), loc=loc)
        inner = ir.Const(0, T.i32, loc)
        for loop in site.loops[1:]:
            inner = _op("add", _op("mul", inner, ir.Const(_trip((loop,)), T.i32, loc)),
                        _op("sub", ir.Var(loop.var, T.i32, loc), loop.start, loc=loc), loc=loc)
        column = _op("add", ir.Const(int(self.base[k]), T.i32, loc), inner, loc=loc)
        stores = [ir.Store(self.index, (iteration, column), flat, loc)]
        if k in self.reads:
            column = _op("add", ir.Const(self.value_base[k], T.i32, loc), inner, loc=loc)
            stores.append(ir.Store(self.value, (iteration, column),
                                   _op("cast", node, dtype=T.f64), loc))
        return stores

    def clash(self, launch, fld):
        """The parallel conflict on `fld` in this loop, or None."""
        columns = self.columns.get(fld)
        if columns is None:
            return None
        index = self.index.host_array
        element = _first_clash(index, columns, self.slots, SLOTS["store"],
                               ir.array_size(fld))
        if element < 0:
            return None
        iteration, column = np.nonzero(index[:, columns] == element)   # in iteration order
        sites = self.site_of[columns][column]
        writes = np.array([self.kinds[int(k)][0] != "read" for k in sites])
        others = iteration != iteration[0]
        # the pair names a write: a later iteration's, where the first touch is a read (every
        # iteration may read before one writes); else the first iteration's own write
        first, later = 0, others & writes if not writes[0] else others
        if not later.any():
            first, later = int(np.argmax(~others & writes)), others
        other = int(np.argmax(later))
        return rules.parallel_conflict(
            kernel=launch.kernel, field=fld.name, element=_element(fld, element),
            earlier=self.access(launch, int(sites[first]), int(iteration[first])),
            later=self.access(launch, int(sites[other]), int(iteration[other])))

    def changed_reads(self, fld, now: np.ndarray):
        """(site, iteration, element, value read) of the first replayed read of `fld` whose
        element holds another value now, or None."""
        for k in self.reads:
            if self.sites[k].field is not fld:
                continue
            width, v = self.width[k], self.value_base[k]
            elements = self.index.host_array[:, self.base[k]:self.base[k] + width].reshape(-1)
            read = self.value.host_array[:, v:v + width].reshape(-1)
            ran = np.flatnonzero((elements >= 0) & (elements < now.size))   # (in bounds)
            final = now[elements[ran]].astype(np.float64)
            differs = ~((read[ran] == final) | (np.isnan(read[ran]) & np.isnan(final)))
            if differs.any():
                at = int(ran[np.argmax(differs)])
                return k, at // width, int(elements[at]), float(read[at])
        return None

    def writes_of(self, fld, element: int, iteration: int | None = None) -> list:
        """(site, iteration) of this loop's writes of `element` (in `iteration` only, if
        given), in iteration and then site order (program order, but for inner loops)."""
        index = self.index.host_array
        found = set()
        for c in self.columns.get(fld, ()):
            k = int(self.site_of[c])
            if self.kinds[k][0] == "read":
                continue
            rows = np.flatnonzero(index[:, c] == element)
            found.update((k, int(it)) for it in rows if iteration in (None, it))
        return sorted(found, key=lambda w: (w[1], w[0]))

    def access(self, launch, k: int, iteration: int, value=None) -> Access:
        """Site k's access in record row `iteration`; a report names the iteration by its loop
        variable's value, as interp mode does (row 0 is the loop's start)."""
        value = value.item() if isinstance(value, np.generic) else value
        return Access(self.kinds[k][0], self.sites[k].node.loc, launch.kernel, launch.number,
                      self.start + iteration, value, launch.time)


class AccessRecorder:
    """The recording variant of a kernel for some fields, and the reading of its records."""

    def __init__(self, kernel: ir.Kernel, loops: list, replayed: frozenset):
        self.loops = [LoopRecords(f"{kernel.name}_{n}", loop, sites, replayed)
                      for n, (loop, sites) in enumerate(loops)]
        recorded = {id(r.loop): r.recorded_loop() for r in self.loops}
        self.ir = replace(kernel, body=tuple(recorded.get(id(s), s) for s in kernel.body))
        self.fields = list({id(s.field): s.field for r in self.loops for s in r.sites}.values())
        self.program = None         # compiled by the backend on first use

    @classmethod
    def of(cls, kernel: ir.Kernel, fields, replayed: frozenset) -> "AccessRecorder | None":
        """The recorder of `fields`' accesses, or None where records cannot decide (see above)."""
        wanted = {id(f) for f in fields}
        loops: dict = {}
        for site in analysis.access_sites(kernel):
            if id(site.field) not in wanted:
                continue
            loop = site.loops[0] if site.loops else None
            if not (isinstance(loop, ir.For) and loop.parallel
                    and any(s is loop for s in kernel.body)
                    and all(isinstance(x, ir.For) and isinstance(x.start, ir.Const)
                            and isinstance(x.stop, ir.Const) for x in site.loops)):
                return None
            loops.setdefault(id(loop), (loop, []))[1].append(site)
        entries = sum(_trip((loop,)) * sum(_trip(s.loops[1:]) for s in sites)
                      for loop, sites in loops.values())
        if not loops or entries > MAX_ENTRIES:
            return None
        return cls(kernel, list(loops.values()), replayed)

    # ---- one launch ----------------------------------------------------------------------------
    def before(self) -> None:
        """Before the launch: no site has run yet."""
        for records in self.loops:
            records.index.host_array[...] = -1

    def verdict(self, launch, host):
        """After the launch: None (clean) or the rule error the records show."""
        for fld in self.fields:
            for records in self.loops:
                error = records.clash(launch, fld)
                if error is not None:
                    return error
        for fld in self.fields:
            now = host(fld).reshape(-1)
            for n, records in enumerate(self.loops):
                changed = records.changed_reads(fld, now)
                if changed is not None:
                    return self._changed_after_read(launch, fld, n, *changed, now)
        return None

    def _changed_after_read(self, launch, fld, n: int, k: int, it: int, element: int,
                            value: float, now):
        """The rule a replayed read (site k of loop n, iteration `it`) breaks, its element
        changed later in the launch (check/rules.py `overwrite_after_read` names it)."""
        records = self.loops[n]
        mine = records.writes_of(fld, element, it)
        earlier = [w for w in mine if w[0] < k]
        later = [(records, w) for w in mine if w[0] > k] + [
            (other, w) for other in self.loops[n + 1:] for w in other.writes_of(fld, element)]
        writer, (j, at) = later[0] if later else (records, (k, it))
        write = writer.access(launch, j, at, now[element])
        read = records.access(launch, k, it, value)
        name = _element(fld, element)
        accumulated = [w for w in earlier if records.kinds[w[0]][0] in ACCUMULATE]
        return rules.overwrite_after_read(
            field=fld.name, element=name, read=read, write=write,
            first_write=records.access(launch, *earlier[0]) if earlier else None,
            first_accumulation=records.access(launch, *accumulated[0]) if accumulated else None)


@njit(cache=True, nogil=True)
def _first_clash(index, columns, slots, store, size):
    """The flat index of the first element (in iteration order) that two iterations touch in
    ways that do not commute (through the sites `columns`), or -1. One pass finds the span of
    elements touched; the next marks each with its first iteration, whether another touched
    it, and the least and greatest slot its touches took; a last one finds the first clash.
    An index out of the field's bounds (`size` elements) is the launch's own error, not
    recorded: -1 from the start."""
    trip = index.shape[0]
    low, high = np.int64(1) << 62, np.int64(-1)
    for it in range(trip):
        for c in columns:
            f = index[it, c]
            if f >= size:
                index[it, c] = f = -1
            if f >= 0:
                low, high = min(low, f), max(high, f)
    if high < 0:
        return -1
    span = high - low + 1
    owner = np.full(span, -1, np.int64)
    shared = np.zeros(span, np.bool_)
    least = np.full(span, 127, np.int8)
    most = np.full(span, -1, np.int8)
    for it in range(trip):
        for c in columns:
            f = index[it, c] - low
            if f < 0:
                continue
            if owner[f] < 0:
                owner[f] = it
            elif owner[f] != it:
                shared[f] = True
            least[f] = min(least[f], slots[c])
            most[f] = max(most[f], slots[c])
    for it in range(trip):
        for c in columns:
            f = index[it, c] - low
            if f >= 0 and shared[f] and (least[f] != most[f] or least[f] == store):
                return f + low
    return -1


def _trip(loops) -> int:
    """How many times the innermost of these constant-bound loops runs its body."""
    count = 1
    for loop in loops:
        count *= max(loop.stop.value - loop.start.value, 0)
    return count


def _kind(node, replayed) -> tuple:
    """(the access's kind, whether the adjoint replays it)."""
    if isinstance(node, ir.Load):
        return ("read", id(node) in replayed)
    if isinstance(node, ir.Store):
        return ("store", False)
    return ("atomic_" + node.op, False)


def _element(fld, flat: int) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, tuple(fld.shape) +
                                                  tuple(fld.element_shape)))


def _op(name, *args, dtype=None, loc=None):
    loc = loc if loc is not None else args[0].loc
    return ir.Op(name, tuple(args), dtype or args[0].dtype, loc)
