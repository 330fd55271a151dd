"""The access log for lanes (interp/lanes.py): the checks interp/accesslog.py makes element by
element, made over whole index arrays.

While a parallel loop runs as lanes, each load, store and atomic on a primal field is kept as
one event of index arrays (flat indices, the lanes' iterations, the values). When the loop ends,
field by field:
  1. conflicts between iterations: an element touched by two lanes, unless every access to it
     is a read, or every one the same commutative atomic (+= / -=, min, max); only for fields
     the IR does not prove free of them (fast mode's analysis), and not where the loop's reads
     and writes of the field lie apart (fast mode's box test, over flat index spans);
  2. an element overwritten with another value after a read the adjoint replays (in the Tape's
     scope, or earlier in this launch: Global Data Access Rules 1 and 2);
  3. none: the events are handed to the per-element summaries (interp/elementlog.py): the
     scope's first reads and writes, each element's latest write, the launch's witness, the
     rows read and written, exactly what the scalar log would have recorded. They wait there
     and are folded in with many launches' events at once, when a summary is next read.
What a launch keeps after it ends is kept small, since a Tape holds hundreds of launches:
its rows as a few ints per field (`_LaunchRows`); in its witness, a load's index arrays
shared with the load's previous launch where equal (offsets within a row for a time step's
x[t, i]), and values only where they cannot be read back from one copy of the row or field
the load read when the launch ends (`_witness`). The goal: checks at most 2x unchecked
interp's time and memory (`python -m benchmarks --interp-cost` measures both).
Where 1 or 2 finds something, the loop's writes are undone and the loop runs again on the scalar
path, whose log makes the report (every element, both lines, the values) as it always has: a
violation costs a scalar run of one loop, and a clean loop never does. The detection may flag
what is no violation (two lanes storing the same value); the scalar run then finds nothing.
"""
from __future__ import annotations

import numpy as np

from tinyad.check.facts import kernel_facts
from tinyad.check.hazards import unproven_fields
from tinyad.check.report import ACCUMULATE, SLOTS
from tinyad.check.trail import same_values
from tinyad.core import ir
from tinyad.interp import lanes
from tinyad.interp.accesslog import LoggedMemory
from tinyad.interp.elementlog import LOCS, WHOLE_FIELD

# Arrays of more elements than this are shared with the previous launch's where equal, and
# kept as int32; smaller ones weigh less than the test.
SHARE_AT = 8


class _Event:
    __slots__ = ("kind", "fld", "flat", "row", "lanes", "values", "first_values", "site",
                 "replayed", "time")

    def __init__(self, kind, fld, flat, idx, lanes_, values, site, replayed,
                 first_values=None):
        self.kind, self.fld, self.flat, self.lanes, self.values = kind, fld, flat, lanes_, values
        # the rows touched: the leading index, an int where every lane has the same one (a
        # time step's slice x[t, i]), else one per lane; None for a 0-d field (row ())
        if not idx:
            self.row = None
        else:
            self.row = idx[0] if len(flat) else flat     # (no lane active: no row)
        self.first_values = values if first_values is None else first_values
        self.site, self.replayed, self.time = site, replayed, 0


def _joined(events, attr):
    """One array of the events' `attr` arrays, in event order."""
    parts = [getattr(e, attr) for e in events]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


class _LaunchRows:
    """The rows (leading indices) a launch's lanes read and wrote, per field: gathered while
    the launch runs (a set of single rows, from accesses whose lanes share their leading
    index, and the arrays of the others), kept as each field's distinct rows once it has
    ended (`compact`: a tuple, or an int32 array where arrays came; a replayed read's rows
    stay its flat indices, which the witness keeps anyway), and made into the sets
    launch.read_rows / wrote_rows keep only when the order check asks for them
    (launch.row_source): most launches are never asked. A time-stepped run keeps a row or
    two per launch and field, not every index its launches touched."""

    def __init__(self, launch, shared: dict):
        self.shared = shared     # (field, "read" / "wrote") -> the latest launch's rows
        # the launch's own dicts, not the launch: it holds this object (no reference cycle,
        # which would keep launches past the history alive until the cyclic collector runs)
        self.read_rows, self.wrote_rows = launch.read_rows, launch.wrote_rows
        self.read, self.wrote = {}, {}     # field -> (set of rows, [row arrays], [kept flat])
        launch.row_source = (self.read, self.wrote, self.rows)

    @staticmethod
    def add(into: dict, fld, row, kept_flat=None) -> None:
        """An access's rows: `row` an int, or an array with one per lane. `kept_flat`: its
        flat indices, where something else keeps them anyway (a witness), to make its rows
        from only if the order check asks."""
        entry = into.get(fld)
        if entry is None:
            entry = into[fld] = (set(), [], [])
        if not isinstance(row, np.ndarray):
            entry[0].add(row)
        elif kept_flat is not None:
            entry[2].append(kept_flat)
        elif len(row) <= SHARE_AT:      # a few: as ints at once
            entry[0].update(row.tolist())
        else:
            entry[1].append(row)

    def compact(self, witness) -> tuple:
        """The launch has ended: -> its row_source from now on, each field's distinct rows
        (the same object as the previous launch's where they are the same rows: a 1-d
        field's rows are its elements, and many launches read all of them) and the flat
        indices its witness still keeps (a witness sealed when it ended keeps others: rows
        are made from those now), in tuples rather than this object and its dicts."""
        held = None
        compacted = []
        for how, gathered, into in (("read", self.read, self.read_rows),
                                    ("wrote", self.wrote, self.wrote_rows)):
            pairs = []
            for fld, (single, spread, kept) in gathered.items():
                if kept and held is None:
                    held = {id(part[0]) for parts in witness.pending.values() for part in parts}
                if kept and any(id(flat) not in held for flat in kept):
                    stride = _row_stride(fld)
                    spread = spread + [flat // stride for flat in kept if id(flat) not in held]
                    kept = [flat for flat in kept if id(flat) in held]
                rows = _rows_of(fld, single, spread)
                before = self.shared.get((fld, how))
                if before is not None and rows is not None and len(rows) > 4 and \
                        _same_rows(rows, before):
                    rows = before
                self.shared[(fld, how)] = rows
                pairs.append((fld, rows, tuple(kept)))
            compacted.append((tuple(pairs), into))
        return compacted[0], compacted[1], _gathered_rows

    def rows(self, read, wrote):
        """The row_source maker while the launch runs."""
        return _gathered_rows(*(
            (tuple((fld, _rows_of(fld, single, spread), tuple(kept))
                   for fld, (single, spread, kept) in gathered.items()), into)
            for gathered, into in ((read, self.read_rows), (wrote, self.wrote_rows))))


def _gathered_rows(read, wrote):
    """A launch's rows read and written as the order check wants them: each of `read` and
    `wrote` is ((field, rows, flat indices kept elsewhere), ...) and the launch's dict of
    sets (read_rows / wrote_rows, where the scalar path put its rows) to add them to."""
    for pairs, into in (read, wrote):
        for fld, rows, kept in pairs:
            found = into.setdefault(fld, set())
            if rows is None:
                found.add(())        # a 0-d field
                continue
            found.update((int(r),) for r in rows)
            stride = _row_stride(fld)
            for flat in kept:
                found.update((int(r),) for r in np.unique(flat // stride))
    return read[1], wrote[1]


def _row_stride(fld) -> int:
    """How many flat indices one row of the field spans."""
    shape = fld.host_array.shape
    return fld.host_array.size // shape[0] if shape and shape[0] else 1


def _rows_of(fld, single: set, spread: list):
    """The distinct rows of a set of rows and a list of row arrays, sorted: a tuple where no
    array came, else an int32 array (None: a 0-d field, row ()). The arrays are marked in a
    mask of the field's rows, or sorted where the mask would be the larger."""
    shape = fld.host_array.shape
    if not shape:
        return None
    if not spread:
        return tuple(sorted(single))
    rows = np.concatenate([*spread, np.fromiter(single, np.int64, len(single))])
    if shape[0] > 8 * len(rows):
        return np.unique(rows).astype(np.int32)
    mask = np.zeros(shape[0], bool)
    mask[rows] = True
    return np.flatnonzero(mask).astype(np.int32)


def _same_rows(a, b) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return _same_bits(a, b)
    return type(a) is type(b) and a == b


class LoggedLanes(lanes.PlainLanes):
    """Lane access for a checked forward launch (a LoggedMemory)."""

    def __init__(self, memory: LoggedMemory):
        super().__init__(memory)
        self.events: list = []
        self.saved: list = []
        # Fields whose in-launch hazards the IR does not rule out (as fast mode decides it):
        # only these need the element-wise checks within the loop.
        self.by_boxes = memory.launch.compiled.memos[_unproven_fields]
        self.unproven = set(self.by_boxes)

    def load(self, fld, idx, lanes_, site):
        data, where, flat = self.locate(fld, idx, len(lanes_), site)
        values = data[where]
        if fld.role == "primal":
            self.events.append(_Event("read", fld, flat, idx, lanes_, values, site,
                                      id(site) in self.memory.replayed))
        return values

    def store(self, fld, idx, values, lanes_, site):
        data, where, flat = self.locate(fld, idx, len(lanes_), site)
        self.saved.append((data, where, data[where]))     # to undo the loop
        data[where] = values
        if fld.role == "primal":
            self.events.append(_Event("store", fld, flat, idx, lanes_, values, site, False))

    def atomic(self, op, fld, idx, values, lanes_, site):
        data, where, flat = self.locate(fld, idx, len(lanes_), site)
        old = data[where]
        self.saved.append((data, where, old))
        ufunc = lanes.ATOMIC_UFUNCS[op]
        ufunc.at(data, where, values)
        if fld.role == "primal":
            first = ufunc(old, values).astype(data.dtype, copy=False)
            self.events.append(_Event("atomic_" + op, fld, flat, idx, lanes_, data[where],
                                      site, False, first))

    # ---- the loop has ended ---------------------------------------------------------------
    def end(self, loop) -> bool:
        """-> True when the loop's accesses are clean and logged; False when they were undone
        (the caller runs the loop on the scalar path, which reports)."""
        by_field = self._by_field()
        for fld, events in by_field.items():
            if all(e.kind == "read" for e in events):
                continue        # reads alone neither conflict nor overwrite anything
            if fld in self.unproven and self._apart(fld, events):
                # as fast mode decides it from boxes: this loop's reads and writes of the
                # field are apart, so its iterations cannot meet on an element
                self.unproven = self.unproven - {fld}
            if self._conflicting(fld, events) or self._overwrites_a_replayed_read(fld, events):
                for data, where, old in reversed(self.saved):
                    data[where] = old
                return False
        self._commit(by_field, loop)
        return True

    def _by_field(self):
        grouped: dict = {}
        for e in self.events:
            grouped.setdefault(e.fld, []).append(e)
        return grouped

    def _apart(self, fld, events) -> bool:
        """The IR proves that the loop's writes of `fld` never meet each other, only maybe
        its reads (by_boxes), and the spans of elements read and written are disjoint."""
        if not self.by_boxes.get(fld):
            return False
        if not any(isinstance(e.row, np.ndarray) for e in events):
            read_rows = {e.row for e in events if e.kind == "read"}
            if not any(e.row in read_rows for e in events if e.kind != "read"):
                return True     # each access in one row, and no row both read and written
        reads = [e.flat for e in events if e.kind == "read" and len(e.flat)]
        writes = [e.flat for e in events if e.kind != "read" and len(e.flat)]
        if not reads or not writes:
            return True
        low_r, high_r = min(f.min() for f in reads), max(f.max() for f in reads)
        low_w, high_w = min(f.min() for f in writes), max(f.max() for f in writes)
        return high_r < low_w or high_w < low_r

    def _conflicting(self, fld, events) -> bool:
        if fld not in self.unproven:
            return False
        slots = {SLOTS[e.kind] for e in events}
        if len(slots) == 1 and SLOTS["store"] not in slots:
            return False    # only reads, or only one commutative atomic: nothing conflicts
        flat = np.concatenate([e.flat for e in events])
        lane = np.concatenate([e.lanes for e in events])
        # Most often each element is touched by one lane only, told without sorting: mark
        # each element with a lane that touched it (uninitialised elsewhere, never read).
        owner = np.empty(fld.host_array.size, lane.dtype)
        owner[flat] = lane
        if np.array_equal(owner[flat], lane):
            return False
        slot = np.concatenate([np.full(len(e.flat), SLOTS[e.kind], np.int8) for e in events])
        order = np.lexsort((lane, flat))
        flat, lane, slot = flat[order], lane[order], slot[order]
        starts = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]])
        ends = np.r_[starts[1:], len(flat)] - 1
        shared = lane[starts] != lane[ends]        # touched by two lanes or more
        if not shared.any():
            return False
        low = np.minimum.reduceat(slot, starts)
        high = np.maximum.reduceat(slot, starts)
        return bool(np.any(shared & ((low != high) | (low == SLOTS["store"]))))

    def _overwrites_a_replayed_read(self, fld, events) -> bool:
        writes = [e for e in events if e.kind != "read"]
        if not writes:
            return False
        reads = self.memory.scope.reads
        flat = _joined(writes, "flat")
        cols = reads.columns_at(fld, flat)
        if fld in self.unproven:
            return self._overwrites_in_order(fld, events, cols)
        # Proven free of in-launch hazards: only reads of earlier launches matter, and they
        # come before every write of this loop, so all its writes are checked at once.
        if cols is None:
            return False           # no replayed read of the field yet: nothing to overwrite
        event_c, value_c = cols.flat_event, cols.flat_value
        first = _joined(writes, "first_values")
        in_scope = event_c[flat] != 0
        if not in_scope.any():
            return False
        return bool(np.any(~same_values(first[in_scope], value_c[flat[in_scope]])))

    def _overwrites_in_order(self, fld, events, cols) -> bool:
        reads: list = []     # [(flat, values, row)]: this loop's replayed reads of fld so far
        for e in events:
            if e.kind == "read":
                if e.replayed:
                    reads.append((e.flat, e.values, e.row))
                continue
            if isinstance(e.row, int):     # reads in other single rows cannot meet it
                meeting = [r for r in reads if not isinstance(r[2], int) or r[2] == e.row]
            else:
                meeting = reads
            if cols is None and not meeting:
                continue
            earlier = np.zeros(len(e.flat), bool)
            read_value = np.zeros(len(e.flat), fld.host_array.dtype)
            if meeting:            # read earlier in this loop (the first read's value)
                flat = np.concatenate([r[0] for r in meeting])
                values = np.concatenate([r[1] for r in meeting])
                known, first = np.unique(flat, return_index=True)
                at = np.minimum(np.searchsorted(known, e.flat), len(known) - 1)
                earlier = known[at] == e.flat
                read_value[earlier] = values[first[at[earlier]]]
            if cols is not None:   # read earlier in the scope: that read comes first
                in_scope = cols.flat_event[e.flat] != 0
                read_value = np.where(in_scope, cols.flat_value[e.flat], read_value)
                earlier |= in_scope
            if np.any(earlier & ~same_values(e.first_values, read_value)):
                return True
        return False

    def _commit(self, by_field, loop):
        """Hand the loop's events to the per-element summaries, each with its own tick. They
        only wait there (ElementLog.put_many), to be folded in with many launches' events.
        A launch outside a Tape has a scope of its own, emptied at the next launch: when this
        loop is the last statement of its kernel, nothing will read that scope again, so its
        events go only where later launches look (the witness, latest writes, rows)."""
        memory = self.memory
        launch, checker, scope = memory.launch, memory.checker, memory.scope
        if scope.deferred and launch.compiled.ir.body[-1] is loop:
            scope = None
        kernel, number = launch.kernel, launch.number
        if memory.lane_rows is None:
            memory.lane_rows = _LaunchRows(launch, checker.read_parts)
        rows = memory.lane_rows
        lanes_seen: dict = {}          # id -> the lanes array shared with earlier launches
        memory.witness.segment_at(checker.tick())      # a parallel loop's run: its segment
        for e in self.events:          # ticks in the order the accesses happened
            e.time = checker.tick()
            if len(e.lanes) > SHARE_AT:
                shared = lanes_seen.get(id(e.lanes))
                if shared is None:         # (a loop's lanes are most often the last loop's)
                    shared = lanes_seen[id(e.lanes)] = _shared_array(
                        checker.read_parts, (id(loop), "lanes"), e.lanes)
                e.lanes = shared
        memory.witness.segment_at(checker.tick())
        for fld, events in by_field.items():
            narrow = fld.host_array.size < 2**31
            # the order check compares rows of fields with a gradient only (the rows a
            # launch's adjoint produces and a later launch reads)
            graded = fld.has_grad
            for e in events:
                loc = LOCS.code(e.site.loc)
                flat = e.flat
                if narrow and len(flat) > SHARE_AT:     # int32 flat indices: half the memory
                    flat = flat.astype(np.int32)
                if e.kind == "read":
                    if not e.replayed:
                        if graded:
                            rows.add(rows.read, fld, e.row)
                        continue
                    kept = self._witness(fld, e, flat, loc)
                    if graded:
                        rows.add(rows.read, fld, e.row, kept_flat=kept)
                    if scope is not None:
                        scope.reads.put_many(fld, flat, "read", loc, kernel, number, e.lanes,
                                             e.values, e.time, first_only=True)
                    continue
                if graded:
                    rows.add(rows.wrote, fld, e.row)
                if scope is not None:
                    scope.first_write.put_many(fld, flat, e.kind, loc, kernel, number,
                                               e.lanes, e.first_values, e.time,
                                               first_only=True)
                    if e.kind in ACCUMULATE:
                        scope.accumulated.put_many(fld, flat, e.kind, loc, kernel, number,
                                                   e.lanes, e.first_values, e.time,
                                                   first_only=True)
                checker.last_write.put_many(fld, flat, e.kind, loc, kernel, number, e.lanes,
                                            e.values, e.time, first_only=False)
        self.events, self.saved = [], []

    def _witness(self, fld, e, flat, loc):
        """Hand a replayed read to the launch's witness: -> the flat indices it keeps. A read
        within one row keeps its offsets in the row (the same array at every time step,
        shared) and where the row starts, and no values (the witness keeps the row's when the
        launch ends); another read's indices and values are shared with the load's previous
        launch where equal (a time-stepped program reads its constant inputs again at every
        step). Small reads are kept as they are: they weigh less than the test."""
        witness, shared = self.memory.witness, self.memory.checker.read_parts
        if len(flat) <= SHARE_AT:
            witness.add_many(fld, flat, loc, e.lanes, e.values, e.time)
            return flat
        key = (fld, id(e.site))
        if isinstance(e.row, int):
            base = e.row * _row_stride(fld)
            offsets = _shared_array(shared, key + ("offsets",), flat - base)
            witness.add_many(fld, offsets, loc, e.lanes, None, e.time, base)
            return offsets
        flat = _shared_array(shared, key + ("flat",), flat)
        values = _shared_array(shared, key + ("values",), e.values)
        if values is e.values and len(flat) >= fld.host_array.size:
            # values read anew, as many as the field has or more (N-body: every pair): the
            # witness keeps the field's values when the launch ends instead
            witness.add_many(fld, flat, loc, e.lanes, None, e.time, WHOLE_FIELD)
        else:
            witness.add_many(fld, flat, loc, e.lanes, values, e.time)
        return flat


def _shared_array(last: dict, key, array: np.ndarray) -> np.ndarray:
    """`array`, or the equal one kept under `key` before (which then stays)."""
    before = last.get(key)
    if before is not None and _same_bits(array, before):
        return before
    last[key] = array
    return array


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a is b:
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.nbytes <= 1 << 16:
        return a.tobytes() == b.tobytes()
    if a[0] != b[0] or a[-1] != b[-1]:     # cheap, and most differ at an end (NaN: no match)
        return False
    return bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))


def _unproven_fields(traced) -> dict:
    """The fields of the launch's kernel that the IR does not prove free of in-launch hazards
    (check/hazards.py, fast mode's test), once per kernel: field -> by_boxes, True where only
    reads may meet writes (disjoint elements read and written rule the hazard out). Reads in
    earlier launches of the scope are checked whatever this says (kept in the kernel's
    memos)."""
    replayed = kernel_facts(traced).replayed      # (the LoggedMemory's)
    try:
        return {fld: by_boxes for fld, (_reads, _writes, by_boxes)
                in unproven_fields(traced.ir, replayed).items()}
    except Exception:  # noqa: BLE001  (no proof: every field is checked)
        return dict.fromkeys(ir.fields_of(traced.ir.body), False)


def _logged(memory: LoggedMemory):
    if memory.checker.in_custom_grad:    # grad_for's checks are per element: the scalar path
        return None
    return LoggedLanes(memory)


lanes.LANE_MEMORIES[LoggedMemory] = _logged
