"""Per-element summaries of the access log: one event per element of a field (the first read
of a Tape scope, its first write, its latest write, ...), kept in numpy arrays the size of the
field rather than as one object per access.

Why: the checker's memory must grow with the fields' size, not with the number of accesses (a
10⁴-element field over 100 steps made 10⁶ Access objects, about 1 GB), and stay within about
the fields' own size: checks may cost at most 2x unchecked interp's memory. So an element
keeps only what differs from element to element:
  * `event`: a row of its log's event table (0: no event), where what is the same for every
    element of one access statement in one launch sits once: the kind of access, the source
    line and kernel (one `site` code), the launch and the checker's tick. A loop run as
    lanes adds one row per load or write statement; the scalar path one per event recorded
    (the table is compacted when most of its rows are no longer referenced);
  * `iteration`: the parallel loop's iteration (+1; 0: not in a loop);
  * `value`: only in a log whose values a later check compares (the replayed reads: a write
    must not change them); a first or latest write is reported by its line, launch and
    iteration, and the value a replayed read sees now is the field's.
A report gets an event back as an `Access` (tinyad/check/report.py).

The scalar access log (interp/accesslog.py) reads and writes one element at a time; the lanes'
log (interp/lanelog.py) whole index arrays at once (flat indices into the field's array).
"""
from __future__ import annotations

import weakref
from array import array

import numpy as np
import numpy.ma  # noqa: F401  (np.unique imports it at its first call: load it with the checker)

from tinyad.check import changes
from tinyad.check.report import SLOTS, Access
from tinyad.check.trail import same_values

KINDS = (*SLOTS, "python write")      # every access kind, coded in one byte
KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}


class _Names:
    """Source lines and kernel names as small integers (an element's column holds the code)."""

    def __init__(self):
        self.items: list = [None]
        self.codes: dict = {}

    def code(self, item) -> int:
        key = id(item) if not isinstance(item, (str, tuple)) else item
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.items)
            self.items.append(item)
        return code


LOCS = _Names()       # SrcLoc objects, kept alive here
KERNELS = _Names()    # kernel names
SITES = _Names()      # (kind code, LOCS code, KERNELS code): what one access site is
SITE_OF: dict = {}    # (kind, LOCS code, kernel name) -> its SITES code
INT16_MAX = int(np.iinfo(np.int16).max)
WHOLE_FIELD = "whole field"   # a witness part read from the field's values (Witness.add_many)


class Events:
    """A log's event table: row -> (site code, launch, tick), three entries of one array per
    row (ElementLog._event appends one); row 0 is "no event"."""

    def __init__(self, rows=(0, 0, 0)):
        self.rows = array("q", rows)

    def __len__(self):
        return len(self.rows) // 3

    @property
    def time(self) -> np.ndarray:
        return np.array(self.rows, np.int64)[2::3]

    def access(self, row: int, iteration: int, value) -> Access:
        site, launch, time = self.rows[3 * row:3 * row + 3]
        kind, loc, kernel = SITES.items[site]
        return Access(KINDS[kind], LOCS.items[loc], KERNELS.items[kernel] if kernel else None,
                      launch or None, None if iteration == 0 else iteration - 1, value, time)

    def kept(self, rows: np.ndarray) -> "Events":
        """A table of only `rows` (sorted, row 0 first), in that order."""
        table = np.array(self.rows, np.int64).reshape(-1, 3)[rows]
        return Events(table.reshape(-1).tolist())


class Columns:
    """One field's events: per element, a row of the log's event table (`event`, 0: none), the
    iteration and, in a log that keeps them, the value; the first two int16 until a number
    needs more. Only `event` starts zeroed; the others are read only where it is set."""
    __slots__ = ("event", "iteration", "value", "log", "flat_event", "flat_iteration",
                 "flat_value")

    def __init__(self, data: np.ndarray, log: "ElementLog"):
        shape = data.shape
        self.log = weakref.ref(log)     # (not the log itself: no cycle to outlive it)
        self.event = np.zeros(shape, log.event_dtype)
        # the iteration + 1 (0: not in a loop), int16 until an iteration needs more
        self.iteration = np.empty(shape, np.int16)
        self.value = np.empty(shape, data.dtype) if log.keeps_values else None
        # the same columns as 1-d views, made once (for flat index arrays)
        self.flat_event = self.event.reshape(-1)
        self.flat_iteration = self.iteration.reshape(-1)
        self.flat_value = None if self.value is None else self.value.reshape(-1)

    def widen(self, highest: int) -> None:
        """Make room in `iteration` for `highest` (iteration + 1)."""
        if highest > INT16_MAX and self.iteration.dtype == np.int16:
            self.iteration = self.iteration.astype(np.int32)
            self.flat_iteration = self.iteration.reshape(-1)

    @property
    def time(self) -> np.ndarray:
        """Each element's tick (0: no event), made from the event table (for tests and
        reports; the checks test `event`)."""
        return self.log().events.time[self.event]


# Lanes' events wait, per field, until the log is next read or they reach a quarter of the
# field's size, or this many elements for a small field: then they are folded in. A fold costs
# several numpy calls whatever its size, and a Tape's scope is often dropped unread (N-body:
# one launch a Tape reads 16 positions 256 times): waiting events of a small field weigh
# about 20 bytes an element, 20 kB at most here.
FOLD_AT = 1 << 10
FOLD_PARTS = 64     # (a part's arrays weigh more than a few elements: a 0-d field's events)
# A launch's witness is sealed when it ends if its waiting reads outnumber this many and its
# fields' elements (sealed, an element costs more than a waiting read).
SEAL_AT = 1 << 12
FOLD_CHUNK = 1 << 11     # elements folded in one update, at most (about)
# The event table is compacted when it reaches this many rows and twice the rows in use.
COMPACT_EVENTS_AT = 1 << 12


class ElementLog:
    """At most one event per element of each field.

    Events from lanes (`put_many`) are not written into the columns at once: each waits in a
    pending list, and whatever reads the log first folds the field's pending events in one
    update (`_fold`). A program that launches many small loops (a time step at a time) then
    updates the columns once per many launches rather than once per loop, and the pending
    lists stay below a quarter of the field's size (or FOLD_AT elements)."""

    def __init__(self, reusable: bool = False, values: bool = True):
        self.keeps_values = values
        self.events = Events()
        self.event_dtype = np.int16     # event columns widen to int32 past 32767 rows
        self.compact_at = COMPACT_EVENTS_AT
        self.fields: dict = {}      # field -> Columns
        self.pending: dict = {}     # field -> [(first_only, flat, event row, values, lanes)],
        self.pending_size: dict = {}  #          waiting; their length
        self.pending_span: dict = {}  # field -> (lowest, highest flat index, parts counted)
        # A reusable log (one launch's, outside a Tape) remembers where it put events, to
        # empty itself for the next launch without allocating field-sized columns again.
        self.dirty: list | None = [] if reusable else None   # (event column, flat indices)
        self.dirty_fields: set = set()                      # fields written element-wise

    def empty(self) -> None:
        """Forget every event (a reusable log: only the elements it recorded are touched)."""
        self.pending, self.pending_size, self.pending_span = {}, {}, {}
        for events, where in self.dirty:
            events[where] = 0
        for fld in self.dirty_fields:
            self.fields[fld].event.fill(0)
        self.dirty, self.dirty_fields = [], set()
        del self.events.rows[3:]

    def columns(self, fld, create=True) -> Columns | None:
        if fld in self.pending:
            self._fold(fld)
        return self._columns(fld, create)

    def columns_at(self, fld, flat) -> Columns | None:
        """The columns, up to date at least at the flat indices `flat`: events waiting
        elsewhere stay waiting (a time step writes rows that its reads did not touch)."""
        parts = self.pending.get(fld)
        if parts and len(flat):
            # the waiting events' span of flat indices, extended over the parts added since
            low, high, counted = self.pending_span.get(fld, (np.inf, -np.inf, 0))
            for part in parts[counted:]:
                if len(part[1]):
                    low, high = min(low, part[1].min()), max(high, part[1].max())
            self.pending_span[fld] = (low, high, len(parts))
            if low <= flat.max() and flat.min() <= high:
                self._fold(fld)
        return self._columns(fld, create=False)

    def _columns(self, fld, create=True) -> Columns | None:
        cols = self.fields.get(fld)
        if cols is None and create:
            cols = self.fields[fld] = Columns(fld.host_array, self)
        return cols

    def _event(self, kind, loc_code, kernel, launch, time) -> int:
        """A new row of the event table (compacting the table first when it has grown)."""
        rows = self.events.rows       # (inline: the lanes commit many events per launch)
        if len(rows) >= 3 * self.compact_at:
            self._compact_events()
            rows = self.events.rows
        site = SITE_OF.get((kind, loc_code, kernel))
        if site is None:
            site = SITE_OF[(kind, loc_code, kernel)] = SITES.code(
                (KIND_CODE[kind], loc_code, KERNELS.code(kernel) if kernel is not None else 0))
        rows.extend((site, launch or 0, time))
        row = len(rows) // 3 - 1
        if row > INT16_MAX and self.event_dtype == np.int16:
            self._widen_events()
        return row

    def _widen_events(self) -> None:
        """Event columns as int32 from now on (a `dirty` entry follows its column)."""
        self.event_dtype = np.int32
        wider = {}
        for cols in self.fields.values():
            old = cols.flat_event
            cols.event = cols.event.astype(np.int32)
            cols.flat_event = wider[id(old)] = cols.event.reshape(-1)
        if self.dirty:
            self.dirty = [(wider[id(column)], where) for column, where in self.dirty]

    def _compact_events(self) -> None:
        """Keep only the event rows some element refers to, renumbered in order."""
        for fld in list(self.pending):
            self._fold(fld)
        used = [np.unique(cols.event) for cols in self.fields.values()]
        rows = np.unique(np.concatenate([np.zeros(1, np.int32), *used]))
        self.events = self.events.kept(rows)
        for cols in self.fields.values():     # (in place: `dirty` holds these columns)
            cols.event[...] = np.searchsorted(rows, cols.event)
        self.compact_at = max(COMPACT_EVENTS_AT, 2 * len(rows))

    # ---- one element (the scalar log) -----------------------------------------------------
    def has(self, fld, index) -> bool:
        cols = self.columns(fld, create=False)
        return cols is not None and cols.event[index] != 0

    def get(self, fld, index) -> Access | None:
        cols = self.columns(fld, create=False)
        if cols is None or cols.event[index] == 0:
            return None
        value = None if cols.value is None else cols.value[index][()]
        return self.events.access(int(cols.event[index]), int(cols.iteration[index]), value)

    def put(self, fld, index, kind, loc, kernel, launch, iteration, value, time) -> None:
        """Record the event at `index`, replacing any earlier one."""
        row = self._event(kind, LOCS.code(loc), kernel, launch, time)
        cols = self.columns(fld)
        cols.event[index] = row
        if self.dirty is not None:      # element by element: empty the whole column
            self.dirty_fields.add(fld)
        if cols.value is not None:
            cols.value[index] = value
        if iteration is not None:
            cols.widen(iteration + 1)
        cols.iteration[index] = 0 if iteration is None else iteration + 1

    def put_first(self, fld, index, *event) -> bool:
        """Record the event unless the element has one; -> whether it was recorded."""
        cols = self.columns(fld)
        if cols.event[index] != 0:
            return False
        self.put(fld, index, *event)
        return True

    def clear(self, fld, index) -> None:
        cols = self.columns(fld, create=False)
        if cols is not None:
            cols.event[index] = 0

    def elements(self, fld) -> list:
        """The indices of the elements of `fld` that have an event, in index order."""
        cols = self.columns(fld, create=False)
        if cols is None:
            return []
        return [tuple(int(i) for i in where) for where in zip(*np.nonzero(cols.event))]

    # ---- index arrays (the lanes' log) -----------------------------------------------------
    def put_many(self, fld, flat, kind, loc, kernel, launch, lanes, values, time,
                 first_only: bool) -> None:
        """Record an event at each flat index (a later duplicate replaces an earlier one,
        unless `first_only`, which also keeps the events already there): one load or write
        statement of lanes, `kind` its name, `loc` its LOCS code, `time` its tick, `lanes`
        and `values` one per index. The events wait until the log is next read (see the
        class)."""
        row = self._event(kind, loc, kernel, launch, time)
        if fld.host_array.ndim == 0 and len(flat) > 1:   # one element: its one event
            keep = [0] if first_only else [-1]        # (copies: no view keeps the rest)
            flat, lanes = flat[keep], lanes[keep]
            values = values[keep] if np.ndim(values) else values
        parts = self.pending.setdefault(fld, [])
        parts.append((first_only, flat, row, values if self.keeps_values else None, lanes))
        size = self.pending_size[fld] = self.pending_size.get(fld, 0) + len(flat)
        if size >= FOLD_AT and 4 * size >= fld.host_array.size or len(parts) >= FOLD_PARTS:
            self._fold(fld)     # (a small field: at FOLD_AT elements, or FOLD_PARTS parts)

    def _fold(self, fld) -> None:
        """Write the field's pending events into its columns, in the order they came."""
        parts = self.pending.pop(fld)
        del self.pending_size[fld]
        self.pending_span.pop(fld, None)
        start = 0
        while start < len(parts):
            # runs of parts alike in first_only (in practice: all), of at most FOLD_CHUNK
            # elements: the temporaries of one update stay small
            stop, size = start + 1, len(parts[start][1])
            while stop < len(parts) and parts[stop][0] == parts[start][0] and \
                    size < FOLD_CHUNK:
                size += len(parts[stop][1])
                stop += 1
            run = parts[start:stop]
            if len(run) == 1:
                self._write(fld, *run[0])
            else:
                rows = np.array([p[2] for p in run], self.event_dtype)
                self._write(fld, run[0][0], np.concatenate([p[1] for p in run]),
                            np.repeat(rows, [len(p[1]) for p in run]),
                            None if run[0][3] is None else np.concatenate([p[3] for p in run]),
                            np.concatenate([p[4] for p in run]))
            start = stop

    def _write(self, fld, first_only, flat, rows, values, lanes):
        cols = self._columns(fld)
        if first_only:
            # Keep elements with no event yet; assigned back to front, so that of duplicate
            # indices the first one's event is the one left (numpy's last write wins).
            keep = np.flatnonzero(cols.flat_event[flat] == 0)[::-1]
            flat = flat[keep]
            rows, values, lanes = (x[keep] if np.ndim(x) else x for x in (rows, values, lanes))
        cols.flat_event[flat] = rows
        if self.dirty is not None:
            self.dirty.append((cols.flat_event, flat))
        if len(flat):
            cols.widen(int(np.max(lanes)) + 1)
        cols.flat_iteration[flat] = lanes + 1
        if cols.flat_value is not None:
            cols.flat_value[flat] = values


class ReadColumns:
    """A witness's first reads of one field, a column per fact: each a scalar where it is the
    same for every read (no memory per element), else an array with an entry per read."""
    __slots__ = ("time", "value", "kind", "loc", "kernel", "launch", "iteration")
    NAMES = __slots__


def _access(cols: ReadColumns, index) -> Access:
    def at(column):     # a column the same for every element is kept as a scalar
        return column[index] if np.ndim(column) else column
    iteration, kernel = int(at(cols.iteration)), int(at(cols.kernel))
    return Access(KINDS[at(cols.kind)], LOCS.items[at(cols.loc)],
                  KERNELS.items[kernel] if kernel else None, int(at(cols.launch)) or None,
                  None if iteration == 0 else iteration - 1, at(cols.value)[()],
                  int(at(cols.time)))


class Witness:
    """The values a launch's replayed loads read, compact: for each field, the flat indices of
    the elements read and each one's first read (a copy of only those values, which the
    launch's adjoint checks are still there).

    The lanes' reads wait as they came (one part per load statement) until the adjoint asks
    whether any changed: a part whose values are all still there answers no without sorting
    anything, and only a change seals the field (each element's first read, for the report).
    A launch whose waiting reads outgrow its fields' size (many reads of few elements) is
    sealed when it ends, so the witness stays the size of what it read.

    A load whose lanes all read one row (a time step's x[t, i]) keeps no values of its own:
    the launch keeps one copy of each such row when it ends (`finish`), which is what the
    loads read (a write that changed a value after its read is a violation, reported
    already), and several loads of one row (x[t, a], x[t, b], each component) share it."""

    __slots__ = ("kernel", "launch", "pending", "pending_size", "ones", "fields", "rows",
                 "segments")

    def __init__(self, kernel=None, launch=None):
        self.kernel, self.launch = KERNELS.code(kernel), launch     # (KERNELS code, number)
        # field -> [(flat, time, values, loc, lanes, base)]: a load's reads of the lanes
        self.pending: dict = {}
        self.pending_size = 0
        self.ones: dict = {}      # (field, index) -> event tuple, from the scalar log
        self.fields: dict = {}    # sealed: field -> (flat indices, Columns of 1-d arrays)
        self.rows: dict = {}      # (field, row start) -> that row's values when it ended
        # the ticks at which a run of a parallel loop began and ended: a read's segment (the
        # stretch of the launch it came in) is the number of these before its tick
        self.segments = array("q")

    def segment_at(self, tick: int) -> None:
        self.segments.append(tick)

    def order(self, read: Access) -> tuple:
        """Where a read of this launch comes in a serial run of it: by segment, then the
        parallel loop's iteration, then time (each element's first read is the first so)."""
        segment = int(np.searchsorted(self.segments, read.time, side="right")) \
            if self.segments else 0
        return (segment, -1 if read.iteration is None else read.iteration, read.time)

    def add_one(self, fld, index, event) -> None:
        self.ones.setdefault((fld, index), event)

    def add_many(self, fld, flat, loc, lanes, values, time, base=None) -> None:
        """Reads of the lanes of the witness's launch: `loc` a LOCS code, `time` a tick. With
        a `base`, the reads lie in one row: `flat` are their offsets in the row (the same
        array at every time step), `base` where the row starts, and `values` None (the row's
        values are kept when the launch ends); base WHOLE_FIELD: the same, for the whole
        field (and `flat` its flat indices)."""
        self.pending.setdefault(fld, []).append((flat, time, values, loc, lanes, base))
        self.pending_size += len(flat)
        if values is None:
            self.rows[(fld, base)] = None

    def finish(self) -> "Witness":
        """The launch has ended: keep the rows its one-row loads read, and seal now only what
        would otherwise take too much room."""
        for fld, base in self.rows:
            data = fld.host_array.reshape(-1)
            self.rows[(fld, base)] = data.copy() if base is WHOLE_FIELD else \
                data[base:base + data.size // len(fld.host_array)].copy()
        if self.ones or self.pending_size > max(
                SEAL_AT, sum(fld.host_array.size for fld in self.pending)):
            self.seal()
        return self

    def seal(self, only=None) -> "Witness":
        for (fld, index), (kind, loc, kernel, launch, it, value, time) in self.ones.items():
            flat = np.ravel_multi_index(index, fld.host_array.shape) if index else 0
            self.pending.setdefault(fld, []).append((
                np.array([flat]), time, np.array([value]), LOCS.code(loc),
                -1 if it is None else it, None))
        self.ones = {}
        read = KIND_CODE["read"]
        for fld in list(self.pending) if only is None else [only]:
            # in ReadColumns.NAMES order after the flat indices
            parts = [(_flat(part), part[1], self._values(fld, part), read, part[3],
                      self.kernel, self.launch, part[4]) for part in self.pending.pop(fld)]
            if fld in self.fields:      # sealed before: its first reads come first
                flat, cols = self.fields[fld]
                parts.insert(0, (flat, *(getattr(cols, n) for n in ReadColumns.NAMES[:-1]),
                                 cols.iteration - 1))
            self.fields[fld] = _first_reads(parts, fld.host_array.dtype, self.segments)
        self.pending_size = sum(len(p[0]) for parts in self.pending.values() for p in parts)
        return self

    def _values(self, fld, part) -> np.ndarray:
        """The values a waiting part read: its own, or from the row it read."""
        if part[2] is not None:
            return part[2]
        return self.rows[(fld, part[5])][part[0]]

    def first(self, fld, index) -> Access | None:
        """The launch's first read of `fld[index]` in a serial run of it (`order`), or None.
        Only once the launch has ended (`finish` keeps the rows some reads share)."""
        if fld in self.pending or self.ones:
            self.seal()
        entry = self.fields.get(fld)
        if entry is None:
            return None
        flat, cols = entry
        wanted = np.ravel_multi_index(index, fld.host_array.shape) if index else 0
        k = int(np.searchsorted(flat, wanted))
        return _access(cols, k) if k < len(flat) and flat[k] == wanted else None

    def changed_fields(self) -> list:
        """The fields some of whose reads no longer hold the value read (sealing those)."""
        found = []
        rows_held: dict = {}     # (field, row start) -> does the row hold what it held then
        for fld in set(self.pending) | set(self.fields):
            data = fld.host_array.reshape(-1)
            parts = self.pending.get(fld, ())
            if any(self._part_changed(fld, p, data, rows_held) for p in parts):
                self.seal(only=fld)
            entry = self.fields.get(fld)
            if entry is not None and not _unchanged(data[entry[0]], entry[1].value):
                found.append(fld)
        return found

    def _part_changed(self, fld, part, data: np.ndarray, rows_held: dict) -> bool:
        """Does some element a waiting part read no longer hold its value? The loads of a row
        kept whole (`finish`) ask once per row first: all of it unchanged answers for them."""
        if part[2] is None:
            key = (fld, part[5])
            held = rows_held.get(key)
            if held is None:
                kept = self.rows[key]
                now = data if part[5] is WHOLE_FIELD else data[part[5]:part[5] + kept.size]
                held = rows_held[key] = _unchanged(now, kept)
            if held:
                return False
        return not _unchanged(data[_flat(part)], self._values(fld, part))

    def changed(self, fld, data: np.ndarray) -> dict:
        """The elements of `fld` whose value is no longer the one read: index -> Access."""
        if fld in self.pending or self.ones:
            self.seal()
        entry = self.fields.get(fld)
        if entry is None:
            return {}
        flat, cols = entry
        now = data.reshape(-1)[flat]
        differ = np.flatnonzero(changes.changed(cols.value, now))
        return {tuple(int(i) for i in np.unravel_index(flat[k], data.shape)): _access(cols, k)
                for k in differ}


def _flat(part) -> np.ndarray:
    """A waiting witness part's flat indices."""
    return part[0] if part[5] is None or part[5] is WHOLE_FIELD else part[0] + part[5]


def _first_reads(parts, dtype, segments=()):
    """(flat indices, Columns) of each element's first read among the parts, each part a
    tuple of columns in ReadColumns.NAMES order after its flat indices, a column a scalar (the
    same for the part's every read) or one entry per read. A column the same for every read
    stays a scalar (no memory per element; _access reads either). First: in a serial run of
    the launch (Witness.order: segment, iteration, time; lanes run a loop's statements one
    after the other over all its iterations, so time alone is not that order)."""
    if len(parts) == 1:       # one part (the common case): its reads are in time order
        flat = parts[0][0]
        if len(flat) > 1 and not np.all(flat[1:] > flat[:-1]):   # (increasing: all distinct)
            flat, first = np.unique(flat, return_index=True)
            columns = [c[first] if np.ndim(c) else c for c in parts[0][1:]]
        else:
            columns = list(parts[0][1:])
    else:
        n = [len(p[0]) for p in parts]
        columns = [_joined_column([p[k] for p in parts], n) for k in range(len(parts[0]))]
        order = _in_serial_order(columns[0], columns[1], columns[7], segments)
        flat = columns[0][order]
        first = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]])    # each element's first
        flat = flat[first]
        columns = [c[order][first] for c in columns[1:]]
    picked = ReadColumns()
    for name, column in zip(ReadColumns.NAMES, columns):
        setattr(picked, name, np.asarray(column, dtype) if name == "value" else column)
    picked.iteration = picked.iteration + 1     # lanes kept as they were: 0 is "no loop"
    return flat, picked


def _in_serial_order(flat, time, iteration, segments) -> np.ndarray:
    """The reads' order by element, then as a serial run of the launch makes them (segment,
    iteration, time: Witness.order): one sort of the four packed in an int64 (the time as
    the read's rank in time: the parts come in time order, most often), or a sort of each
    where they do not fit."""
    in_time = bool(np.all(time[1:] >= time[:-1]))
    by_time = None if in_time else np.argsort(time, kind="stable")
    if not in_time:
        flat, time, iteration = flat[by_time], time[by_time], iteration[by_time]
    segment = np.searchsorted(np.asarray(segments, np.int64), time, side="right") \
        if len(segments) else np.zeros(time.size, np.int64)
    step = iteration.astype(np.int64) + 1            # (-1: not in a loop)
    rank = np.arange(flat.size, dtype=np.int64)
    tops = (int(flat.max()), int(segment.max()), int(step.max()), flat.size)
    bits = [top.bit_length() for top in tops]
    if sum(bits) <= 62:
        packed = flat.astype(np.int64)
        for x, b in zip((segment, step, rank), bits[1:]):
            packed <<= b
            packed |= x
        order = np.argsort(packed)
    else:
        order = np.lexsort((rank, step, segment, flat))
    return order if in_time else by_time[order]


def _joined_column(pieces, lengths) -> np.ndarray:
    """Pieces of one column (scalars or arrays of the given lengths) end to end."""
    if all(np.ndim(p) == 0 for p in pieces):
        return np.repeat(pieces, lengths)
    return np.concatenate([p if np.ndim(p) else np.full(m, p) for p, m in zip(pieces, lengths)])


def _unchanged(now: np.ndarray, then: np.ndarray) -> bool:
    """Every element the same (NaN equal to NaN): the common answer in one comparison."""
    return bool((now == then).all()) or bool(same_values(now, then).all())
