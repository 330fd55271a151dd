"""One launch's accesses to the fields being checked (its trail), and the rules they show
broken within the launch. The launch wrote the trail as it ran (its recording variant
of the kernel, tinyad/check/accessrecord.py); the judgement here does not depend on how.

A trail lists the accesses as columns, one entry an access, ordered by segment, then iteration,
then program order within the iteration:

    segment    the kernel's top-level statement the access is in (a parallel loop runs its
               iterations in any order; any other statement runs serially)
    iteration  the parallel loop variable's value (SERIAL outside a parallel loop)
    site       which access of the kernel (`TrailSite`: the field, the kind, the source line)
    flat       the element's flat index (out of bounds: the launch's own error, not judged here)
    value      for a read the adjoint replays, the value it read; for a store, the value stored

From it:
  * an element two iterations of one parallel loop touch, one of them storing another value, or
    in two different ways (a read and an atomic add, an add and a min): the iterations' order
    decides the result (a parallel conflict), named where it arises along the trail, as the
    interpreter meets it;
  * a replayed read whose element holds another value when the launch ends: a later access of
    its own iteration, or a later statement, changed it after it was read (another iteration's
    change is a conflict, found first): Rule 1, or Rule 2 where a store came before the read, or
    a read during accumulation where adds came before it and after it.

The two verdicts that name what a report says, `conflict` (which pair of accesses a parallel
conflict names) and `changed_after_read` (which rule an overwrite of a replayed read breaks),
are the only ones: a launch's trail asks them after the launch, and the witness's copies when a
later write or a launch's own-element compare changes a read.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from tinyad.check import rules
from tinyad.check.report import ACCUMULATE, SLOTS, Access

SERIAL = np.iinfo(np.int64).min      # the iteration of an access outside a parallel loop


@dataclass(frozen=True)
class TrailSite:
    """One access of the kernel the trail can name."""
    field: object
    kind: str          # "read", "store", "atomic_add", ...
    loc: object
    replayed: bool     # a read whose value the adjoint replays (its value is in the trail)

    @property
    def writes(self) -> bool:
        return self.kind != "read"


class Trail:
    """The columns of one launch's trail (see the module's docstring)."""

    def __init__(self, sites: list, parallel: list, segment, iteration, site, flat, value):
        self.sites, self.parallel = sites, parallel
        self.segment, self.iteration, self.site = segment, iteration, site
        self.flat, self.value = flat, value
        self._slots = np.array([SLOTS[s.kind] for s in sites], np.int8)

    def of_field(self, fld, among=None) -> np.ndarray:
        """The positions of the entries that access `fld` (of the sites `among` only)."""
        wanted = [k for k, s in enumerate(self.sites) if s.field is fld and
                  (among is None or among(s))]
        return np.flatnonzero(np.isin(self.site, wanted))

    def access(self, launch, at: int, value=None) -> Access:
        site = self.sites[int(self.site[at])]
        iteration = int(self.iteration[at])
        value = value.item() if isinstance(value, np.generic) else value
        return Access(site.kind, site.loc, launch.kernel, launch.number,
                      None if iteration == SERIAL else iteration, value, launch.time)


def violations(trail: Trail, launch, fields, now_of, every: bool = False) -> list:
    """The rules the launch broke on `fields`, as errors: the first one (parallel conflicts
    before changed reads), or with `every` (warn mode, which counts a bug's elements) one for
    each element. `now_of(field)` gives the field's values after the launch."""
    found = []
    for fld in fields:
        for segment, parallel in enumerate(trail.parallel):
            if parallel:
                found += _clashes(trail, launch, fld, segment, every)
                if found and not every:
                    return found
    for fld in fields:
        now = now_of(fld).reshape(-1)
        for at in _changed_reads(trail, fld, now, every):
            found.append(_changed_after_read(trail, launch, fld, at, now))
            if not every:
                return found
    return found


def _clashes(trail: Trail, launch, fld, segment: int, every: bool) -> list:
    """The parallel conflicts on `fld` among the iterations of one parallel loop, in the order
    they arise along the trail (as the interpreter meets them, iteration by iteration): the
    first, or each element's first."""
    at = trail.of_field(fld)
    at = at[trail.segment[at] == segment]
    if at.size == 0:
        return []
    iteration, flat = trail.iteration[at], trail.flat[at]
    arisen = _clashing(iteration, flat, trail.value[at], trail._slots[trail.site[at]],
                       SLOTS["store"], _size(fld), every)
    return [_conflict(trail, launch, fld, at[:n + 1][flat[:n + 1] == flat[n]], int(flat[n]))
            for n in arisen]


def _conflict(trail: Trail, launch, fld, on: np.ndarray, element: int):
    """The conflict report of one element, from its accesses `on` (in trail order) up to the
    one that made the conflict."""
    return conflict(launch.kernel, fld.name, _element(fld, element),
                    [trail.sites[int(k)].writes for k in trail.site[on]], trail.iteration[on],
                    lambda k: trail.access(launch, int(on[k])))


def conflict(kernel: str, field: str, element: tuple, writes, iterations, access):
    """The parallel-conflict error of fld[element], from its accesses in order up to the one
    that made the conflict: whether each writes, its iteration, and `access(k)` the k-th as
    an Access (built for the two named only). It names a write, a later iteration's where the
    first touch is a read (every iteration may read before one writes), else the first
    iteration's own write; with the first touch, or that write."""
    writes, iterations = np.asarray(writes, bool), np.asarray(iterations)
    others = iterations != iterations[0]
    first, later = 0, others & writes if not writes[0] else others
    if not later.any():
        first, later = int(np.argmax(~others & writes)), others
    return rules.parallel_conflict(kernel=kernel, field=field, element=element,
                                   earlier=access(first), later=access(int(np.argmax(later))))


def _changed_reads(trail: Trail, fld, now: np.ndarray, every: bool) -> list:
    """The positions of the replayed reads of `fld` whose element holds another value now: the
    first, or the first of each element."""
    at = trail.of_field(fld, lambda s: s.replayed)
    at = at[(trail.flat[at] >= 0) & (trail.flat[at] < now.size)]
    changed = at[~same_values(trail.value[at], now[trail.flat[at]].astype(np.float64))]
    if not every:
        return [int(p) for p in changed[:1]]
    _, first = np.unique(trail.flat[changed], return_index=True)
    return [int(p) for p in np.sort(changed[first])]


def _changed_after_read(trail: Trail, launch, fld, at: int, now: np.ndarray):
    """The rule the replayed read at position `at` breaks, its element changed later in the
    launch: the writes before it are its own iteration's, or an earlier statement's."""
    element = int(trail.flat[at])
    writes = trail.of_field(fld, lambda s: s.writes)
    writes = writes[trail.flat[writes] == element]
    segment, iteration = trail.segment[at], trail.iteration[at]
    mine = (trail.segment[writes] == segment) & (trail.iteration[writes] == iteration)
    earlier = writes[(mine | (trail.segment[writes] < segment)) & (writes < at)]
    later = writes[(mine & (writes > at)) | (trail.segment[writes] > segment)]
    writer = int(later[0]) if later.size else at
    return changed_after_read(
        fld.name, _element(fld, element), trail.access(launch, at, float(trail.value[at])),
        trail.access(launch, writer, now[element]),
        [trail.sites[int(trail.site[w])].kind for w in earlier],
        lambda k: trail.access(launch, int(earlier[k])))


def changed_after_read(field: str, element: tuple, read: Access, write: Access,
                       earlier=(), access=None):
    """The error of `write` changing fld[element] after `read`, whose value the adjoint
    replays, given the kinds of the element's writes before that read, in order (`earlier`),
    and `access(k)` the k-th of them as an Access (built for those named only): a read during
    accumulation where a += came before and `write` adds, Rule 2 where a write came before and
    `write` stores, else Rule 1 (check/rules.py `overwrite_after_read` words each)."""
    accumulated = next((k for k, kind in enumerate(earlier) if kind in ACCUMULATE), None)
    return rules.overwrite_after_read(
        field=field, element=element, read=read, write=write,
        first_write=access(0) if len(earlier) else None,
        first_accumulation=None if accumulated is None else access(accumulated))


def _clashing(*columns):
    """`_clashing_loop`, compiled by numba on first use where numba is loaded already (fast
    mode); interp mode, which never imports numba, runs it as Python: its trails are as long as
    the accesses the interpreter has just walked one by one."""
    if "numba" not in sys.modules:
        return _clashing_loop(*columns)
    return _compiled_clashing()(*columns)


@functools.cache
def _compiled_clashing():
    from numba import njit  # noqa: PLC0415
    return njit(cache=True, nogil=True)(_clashing_loop)


def _clashing_loop(iteration, flat, value, slots, store, size, every):
    """The positions (in trail order; the first only unless `every`) at which an element's
    accesses first stop commuting: two iterations have touched it, and not all with one slot
    (reads, or one commutative atomic), or with stores of different values (stores of one
    value commute: the result does not depend on their order). One pass finds the span of
    elements touched; the next follows each element's first iteration, whether another
    touched it, the least and greatest slot its touches took and whether its stores differ.
    An index outside the field's `size` elements is the launch's own error: skipped."""
    found = []
    low, high = np.int64(1) << 62, np.int64(-1)
    for f in flat:
        if 0 <= f < size:
            low, high = min(low, f), max(high, f)
    if high < 0:
        return np.array(found, np.int64)
    span = high - low + 1
    owner = np.full(span, SERIAL, np.int64)
    shared = np.zeros(span, np.bool_)
    least = np.full(span, 127, np.int8)
    most = np.full(span, -1, np.int8)
    stored = np.zeros(span, np.bool_)
    first_stored = np.zeros(span, np.float64)
    stores_differ = np.zeros(span, np.bool_)
    reported = np.zeros(span, np.bool_)
    for n in range(flat.size):
        if not 0 <= flat[n] < size:
            continue
        f = flat[n] - low
        if owner[f] == SERIAL:
            owner[f] = iteration[n]
        elif owner[f] != iteration[n]:
            shared[f] = True
        if slots[n] == store:
            if not stored[f]:
                stored[f], first_stored[f] = True, value[n]
            elif not (value[n] == first_stored[f] or (value[n] != value[n] and
                                                      first_stored[f] != first_stored[f])):
                stores_differ[f] = True
        least[f] = min(least[f], slots[n])
        most[f] = max(most[f], slots[n])
        if shared[f] and not reported[f] and (
                least[f] != most[f] or (least[f] == store and stores_differ[f])):
            reported[f] = True
            found.append(n)
            if not every:
                break
    return np.array(found, np.int64)


def same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Within a launch a value is the same only if equal (NaN equals NaN: nothing changed);
    across launches the judge allows rounding (check/changes.py `changed`). Element-wise."""
    same = a == b
    if a.dtype.kind == "f":
        same |= np.isnan(a) & np.isnan(b)
    return same


def _size(fld) -> int:
    return int(np.prod(tuple(fld.shape) + tuple(fld.element_shape), dtype=np.int64))


def _element(fld, flat: int) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, tuple(fld.shape) +
                                                  tuple(fld.element_shape)))
