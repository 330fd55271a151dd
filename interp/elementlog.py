"""Per-element summaries of the access log: one event per element of a field (the first read
of a Tape scope, its first write, its latest write, ...), kept in numpy arrays the size of the
field rather than as one object per access.

Why: the checker's memory must grow with the fields' size, not with the number of accesses (a
10⁴-element field over 100 steps made 10⁶ Access objects, about 1 GB). An `ElementLog` holds, per
field it has seen, six columns shaped like the field's array: when (the checker's tick; 0 means
no event), the value, the kind of access, the source line, the launch and the parallel-loop
iteration. A report gets an event back as an `Access` (tinyad/check/report.py).

The scalar access log (interp/accesslog.py) reads and writes one element at a time; the lanes'
log (interp/lanelog.py) whole index arrays at once (flat indices into the field's array).
"""
from __future__ import annotations

import numpy as np

from tinyad.check.report import Access

KINDS = ("read", "store", "atomic_add", "atomic_sub", "atomic_min", "atomic_max",
         "python write")
KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}


class _Names:
    """Source lines and kernel names as small integers (an element's column holds the code)."""

    def __init__(self):
        self.items: list = [None]
        self.codes: dict = {}

    def code(self, item) -> int:
        key = id(item) if not isinstance(item, str) else item
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.items)
            self.items.append(item)
        return code


LOCS = _Names()       # SrcLoc objects, kept alive here
KERNELS = _Names()    # kernel names


class Columns:
    """One field's events, a column per fact, each shaped like the field's array."""
    __slots__ = ("time", "value", "kind", "loc", "kernel", "launch", "iteration")

    def __init__(self, data: np.ndarray):
        shape = data.shape
        self.time = np.zeros(shape, np.int64)
        self.value = np.zeros(shape, data.dtype)
        self.kind = np.zeros(shape, np.int8)
        self.loc = np.zeros(shape, np.int32)
        self.kernel = np.zeros(shape, np.int16)
        self.launch = np.zeros(shape, np.int32)
        self.iteration = np.zeros(shape, np.int32)   # the iteration + 1; 0: not in a loop

    def flat(self):
        """The same columns as 1-d views (for flat index arrays)."""
        return tuple(getattr(self, name).reshape(-1) for name in Columns.__slots__)


class ElementLog:
    """At most one event per element of each field."""

    def __init__(self):
        self.fields: dict = {}      # field -> Columns

    def columns(self, fld, create=True) -> Columns | None:
        cols = self.fields.get(fld)
        if cols is None and create:
            cols = self.fields[fld] = Columns(fld.data)
        return cols

    # ---- one element (the scalar log) -----------------------------------------------------
    def has(self, fld, index) -> bool:
        cols = self.fields.get(fld)
        return cols is not None and cols.time[index] != 0

    def get(self, fld, index) -> Access | None:
        cols = self.fields.get(fld)
        if cols is None or cols.time[index] == 0:
            return None
        return _access(cols, index)

    def put(self, fld, index, kind, loc, kernel, launch, iteration, value, time) -> None:
        """Record the event at `index`, replacing any earlier one."""
        cols = self.columns(fld)
        cols.time[index] = time
        cols.value[index] = value
        cols.kind[index] = KIND_CODE[kind]
        cols.loc[index] = LOCS.code(loc)
        cols.kernel[index] = KERNELS.code(kernel) if kernel is not None else 0
        cols.launch[index] = launch or 0
        cols.iteration[index] = 0 if iteration is None else iteration + 1

    def put_first(self, fld, index, *event) -> bool:
        """Record the event unless the element has one; -> whether it was recorded."""
        cols = self.columns(fld)
        if cols.time[index] != 0:
            return False
        self.put(fld, index, *event)
        return True

    def clear(self, fld, index) -> None:
        cols = self.fields.get(fld)
        if cols is not None:
            cols.time[index] = 0

    def elements(self, fld) -> list:
        """The indices of the elements of `fld` that have an event, in index order."""
        cols = self.fields.get(fld)
        if cols is None:
            return []
        return [tuple(int(i) for i in where) for where in zip(*np.nonzero(cols.time))]

    # ---- index arrays (the lanes' log) -----------------------------------------------------
    def put_many(self, fld, flat, kind, loc, kernel, launch, lanes, values, time,
                 first_only: bool) -> None:
        """Record one event per flat index (a later duplicate replaces an earlier one, unless
        `first_only`, which also keeps the events already there)."""
        cols = self.columns(fld)
        time_c, value_c, kind_c, loc_c, kernel_c, launch_c, iteration_c = cols.flat()
        if first_only:
            # Keep elements with no event yet; assigned back to front, so that of duplicate
            # indices the first one's event is the one left (numpy's last write wins).
            keep = np.flatnonzero(time_c[flat] == 0)[::-1]
            flat = flat[keep]
            values = values[keep] if np.ndim(values) else values
            lanes = lanes[keep] if np.ndim(lanes) else lanes
        time_c[flat] = time
        value_c[flat] = values
        kind_c[flat] = KIND_CODE[kind]
        loc_c[flat] = LOCS.code(loc)
        kernel_c[flat] = KERNELS.code(kernel)
        launch_c[flat] = launch
        iteration_c[flat] = lanes + 1


def _access(cols: Columns, index) -> Access:
    iteration = int(cols.iteration[index])
    kernel = int(cols.kernel[index])
    return Access(KINDS[cols.kind[index]], LOCS.items[cols.loc[index]],
                  KERNELS.items[kernel] if kernel else None, int(cols.launch[index]) or None,
                  None if iteration == 0 else iteration - 1, cols.value[index][()],
                  int(cols.time[index]))


class Witness:
    """The values a launch's replayed loads read, compact: for each field, the flat indices of
    the elements read and each one's first read (a copy of only those values, which the
    launch's adjoint checks are still there). Filled during the launch, sealed at its end."""

    def __init__(self):
        self.pending: dict = {}   # field -> list of event columns (flat, time, value, ...)
        self.ones: dict = {}      # (field, index) -> event tuple, from the scalar log
        self.fields: dict = {}    # sealed: field -> (flat indices, Columns of 1-d arrays)

    def add_one(self, fld, index, event) -> None:
        self.ones.setdefault((fld, index), event)

    def add_many(self, fld, flat, loc, kernel, launch, lanes, values, time) -> None:
        n = len(flat)
        self.pending.setdefault(fld, []).append((
            flat, np.full(n, time, np.int64), values, np.full(n, KIND_CODE["read"], np.int8),
            np.full(n, LOCS.code(loc), np.int32), np.full(n, KERNELS.code(kernel), np.int16),
            np.full(n, launch, np.int32), lanes.astype(np.int32) + 1))

    def seal(self) -> "Witness":
        for (fld, index), (kind, loc, kernel, launch, it, value, time) in self.ones.items():
            flat = np.ravel_multi_index(index, fld.data.shape) if index else 0
            self.pending.setdefault(fld, []).append(tuple(np.array([v]) for v in (
                flat, time, value, KIND_CODE[kind], LOCS.code(loc), KERNELS.code(kernel),
                launch, 0 if it is None else it + 1)))
        for fld, parts in self.pending.items():
            columns = [np.concatenate(c) for c in zip(*parts)]
            order = np.argsort(columns[1], kind="stable")      # by time: the first read wins
            flat, first = np.unique(columns[0][order], return_index=True)
            picked = Columns.__new__(Columns)
            for name, column in zip(Columns.__slots__, columns[1:]):
                setattr(picked, name, column[order][first].astype(
                    fld.data.dtype if name == "value" else column.dtype, copy=False))
            self.fields[fld] = (flat, picked)
        self.pending, self.ones = {}, {}
        return self

    def changed(self, fld, data: np.ndarray) -> dict:
        """The elements of `fld` whose value is no longer the one read: index -> Access."""
        entry = self.fields.get(fld)
        if entry is None:
            return {}
        flat, cols = entry
        now = data.reshape(-1)[flat]
        differ = np.flatnonzero(~within_rounding(now, cols.value))
        return {tuple(int(i) for i in np.unravel_index(flat[k], data.shape)): _access(cols, k)
                for k in differ}


def within_rounding(now: np.ndarray, read: np.ndarray) -> np.ndarray:
    """Element-wise: the same value, or floats within rounding of each other (128 ulps of the
    largest value read), as fast mode's check has it (compile/replaycheck.py): a step
    recomputed in the backward pass (DiffTaichi's checkpointing) may sum its atomics in
    another order (numpy lanes in the forward, the scalar path inside grad_for), and that
    is not a change."""
    same = same_values(now, read)
    if read.dtype.kind != "f" or same.all():
        return same
    tolerance = 128 * np.finfo(read.dtype).eps
    scale = float(np.nanmax(np.abs(read), initial=0.0))
    return same | np.isclose(now, read, rtol=tolerance, atol=tolerance * scale)


def same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise: equal, or both NaN (nothing changed)."""
    same = a == b
    if a.dtype.kind == "f":
        same |= np.isnan(a) & np.isnan(b)
    return same
