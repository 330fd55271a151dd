"""The access log for lanes (interp/lanes.py): the checks interp/accesslog.py makes element by
element, made over whole index arrays.

While a parallel loop runs as lanes, each load, store and atomic on a primal field is kept as
one event of index arrays (flat indices, the lanes' iterations, the values). When the loop ends:
  1. conflicts between iterations: an element touched by two lanes, unless every access to it
     is a read, or every one the same commutative atomic (+= / -=, min, max);
  2. an element overwritten with another value after a read the adjoint replays (in the Tape's
     scope, or earlier in this launch: Global Data Access Rules 1 and 2);
  3. none: the events go into the per-element summaries (interp/elementlog.py): the scope's
     first reads and writes, each element's latest write, the launch's witness, the rows read
     and written, exactly what the scalar log would have recorded.
Where 1 or 2 finds something, the loop's writes are undone and the loop runs again on the scalar
path, whose log makes the report (every element, both lines, the values) as it always has: a
violation costs a scalar run of one loop, and a clean loop never does. The detection may flag
what is no violation (two lanes storing the same value); the scalar run then finds nothing.
"""
from __future__ import annotations

import numpy as np

from tinyad.core import analysis, ir
from tinyad.interp import lanes
from tinyad.interp.accesslog import ACCUMULATE, LoggedMemory, ReplayMemory
from tinyad.interp.elementlog import same_values

SLOT = {"read": 0, "store": 1, "atomic_add": 2, "atomic_sub": 2, "atomic_min": 3,
        "atomic_max": 4}


class _Event:
    __slots__ = ("kind", "fld", "flat", "lanes", "values", "first_values", "site",
                 "replayed", "rows")

    def __init__(self, kind, fld, flat, lanes_, values, site, replayed, rows,
                 first_values=None):
        self.kind, self.fld, self.flat, self.lanes, self.values = kind, fld, flat, lanes_, values
        self.first_values = values if first_values is None else first_values
        self.site, self.replayed, self.rows = site, replayed, rows


def _flat(data, idx, n):
    if not idx:
        return np.zeros(n, dtype=np.intp)
    return np.ravel_multi_index(idx, data.shape)


def _rows(idx):
    """The leading indices touched, as launch.read_rows keeps them (index[:1])."""
    if not idx:
        return {()}
    if isinstance(idx[0], int):
        return {(idx[0],)}
    return {(int(r),) for r in np.unique(idx[0])}


class LoggedLanes(lanes.PlainLanes):
    """Lane access for a checked forward launch (a LoggedMemory)."""

    def __init__(self, memory: LoggedMemory):
        super().__init__(memory)
        self.events: list = []
        self.saved: list = []
        # Fields whose in-launch hazards the IR does not rule out (as fast mode decides it):
        # only these need the element-wise checks within the loop.
        self.unproven = _unproven_fields(memory.launch.compiled, memory.replayed)

    def _keep_old(self, fld, idx):
        """Remember the values a write is about to replace (to undo the loop)."""
        data = fld.data
        self.saved.append((data, idx, data[idx].copy() if idx else data[()].copy()))

    def load(self, fld, idx, lanes_, site):
        values = super().load(fld, idx, lanes_, site)
        if fld.role == "primal":
            self.events.append(_Event("read", fld, _flat(fld.data, idx, len(lanes_)), lanes_,
                                      values, site, id(site) in self.memory.replayed,
                                      _rows(idx)))
        return values

    def store(self, fld, idx, values, lanes_, site):
        self.checked(fld, idx, site)
        self._keep_old(fld, idx)
        super().store(fld, idx, values, lanes_, site)
        if fld.role == "primal":
            flat = _flat(fld.data, idx, len(lanes_))
            self.events.append(_Event("store", fld, flat, lanes_, values, site, False,
                                      _rows(idx)))

    def atomic(self, op, fld, idx, values, lanes_, site):
        self.checked(fld, idx, site)
        self._keep_old(fld, idx)
        if fld.role != "primal":
            return super().atomic(op, fld, idx, values, lanes_, site)
        flat = _flat(fld.data, idx, len(lanes_))
        old = fld.data.reshape(-1)[flat]
        first = lanes.ATOMIC_UFUNCS[op](old, values).astype(fld.data.dtype, copy=False)
        super().atomic(op, fld, idx, values, lanes_, site)
        self.events.append(_Event("atomic_" + op, fld, flat, lanes_,
                                  fld.data.reshape(-1)[flat], site, False, _rows(idx), first))

    # ---- the loop has ended ---------------------------------------------------------------
    def end(self, loop) -> bool:
        """-> True when the loop's accesses are clean and logged; False when they were undone
        (the caller runs the loop on the scalar path, which reports)."""
        if self._conflicting() or self._overwrites_a_replayed_read():
            for data, idx, old in reversed(self.saved):
                data[idx if idx else ()] = old
            return False
        self._commit()
        return True

    def _by_field(self):
        grouped: dict = {}
        for e in self.events:
            grouped.setdefault(e.fld, []).append(e)
        return grouped

    def _conflicting(self) -> bool:
        for fld, events in self._by_field().items():
            if fld not in self.unproven or all(e.kind == "read" for e in events):
                continue
            flat = np.concatenate([e.flat for e in events])
            lane = np.concatenate([e.lanes for e in events])
            slot = np.concatenate([np.full(len(e.flat), SLOT[e.kind], np.int8) for e in events])
            order = np.lexsort((lane, flat))
            flat, lane, slot = flat[order], lane[order], slot[order]
            starts = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]])
            ends = np.r_[starts[1:], len(flat)] - 1
            shared = lane[starts] != lane[ends]        # touched by two lanes or more
            if not shared.any():
                continue
            low = np.minimum.reduceat(slot, starts)
            high = np.maximum.reduceat(slot, starts)
            if np.any(shared & ((low != high) | (low == SLOT["store"]))):
                return True
        return False

    def _overwrites_a_replayed_read(self) -> bool:
        scope = self.memory.scope
        reads: dict = {}     # field -> [(flat, values)]: this loop's replayed reads so far
        for e in self.events:
            if e.kind == "read":
                if e.replayed and e.fld in self.unproven:
                    reads.setdefault(e.fld, []).append((e.flat, e.values))
                continue
            earlier = np.zeros(len(e.flat), bool)
            read_value = np.zeros(len(e.flat), e.fld.data.dtype)
            if e.fld in reads:     # read earlier in this loop (the first read's value)
                flat = np.concatenate([f for f, _ in reads[e.fld]])
                values = np.concatenate([v for _, v in reads[e.fld]])
                known, first = np.unique(flat, return_index=True)
                at = np.minimum(np.searchsorted(known, e.flat), len(known) - 1)
                earlier = known[at] == e.flat
                read_value[earlier] = values[first[at[earlier]]]
            cols = scope.reads.columns(e.fld, create=False)
            if cols is not None:   # read earlier in the scope: that read comes first
                in_scope = cols.time.reshape(-1)[e.flat] != 0
                read_value = np.where(in_scope, cols.value.reshape(-1)[e.flat], read_value)
                earlier |= in_scope
            if np.any(earlier & ~same_values(e.first_values, read_value)):
                return True
        return False

    def _commit(self):
        memory = self.memory
        launch, checker, scope = memory.launch, memory.checker, memory.scope
        kernel, number = launch.kernel, launch.number
        for e in self.events:
            time, loc = checker.tick(), e.site.loc
            if e.kind == "read":
                launch.read_rows.setdefault(e.fld, set()).update(e.rows)
                if e.replayed:
                    memory.witness.add_many(e.fld, e.flat, loc, kernel, number, e.lanes,
                                            e.values, time)
                    scope.reads.put_many(e.fld, e.flat, "read", loc, kernel, number, e.lanes,
                                         e.values, time, first_only=True)
                continue
            launch.wrote_rows.setdefault(e.fld, set()).update(e.rows)
            scope.first_write.put_many(e.fld, e.flat, e.kind, loc, kernel, number, e.lanes,
                                       e.first_values, time, first_only=True)
            if e.kind in ACCUMULATE:
                scope.accumulated.put_many(e.fld, e.flat, e.kind, loc, kernel, number,
                                           e.lanes, e.first_values, time, first_only=True)
            checker.last_write.put_many(e.fld, e.flat, e.kind, loc, kernel, number, e.lanes,
                                        e.values, time, first_only=False)
        self.events, self.saved = [], []


def _unproven_fields(traced, replayed) -> set:
    """The fields of the launch's kernel that the IR does not prove free of in-launch hazards
    (core/analysis.py, fast mode's test), once per kernel. Reads in earlier launches of the
    scope are checked whatever this says."""
    unproven = getattr(traced, "lanes_unproven", None)
    if unproven is None:
        try:
            unproven = set(analysis.unproven_fields(traced.ir, replayed))
        except Exception:  # noqa: BLE001  (no proof: every field is checked)
            unproven = set(ir.fields_of(traced.ir.body))
        traced.lanes_unproven = unproven
    return unproven


def _logged(memory: LoggedMemory):
    if memory.checker.in_custom_grad:    # grad_for's checks are per element: the scalar path
        return None
    return LoggedLanes(memory)


def _replay(memory: ReplayMemory):
    # The replay's witness found nothing changed: its loads need no checks one by one.
    return None if memory.changed else lanes.PlainLanes(memory)


lanes.LANE_MEMORIES[LoggedMemory] = _logged
lanes.LANE_MEMORIES[ReplayMemory] = _replay
