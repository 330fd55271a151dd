"""The replayed reads the checker watches, copied only when something may overwrite them.

After a forward launch, each box its adjoint will replay is filed here as a `ReplayedRead`
without copying anything: as long as no write that may overlap the box has happened, the field
still holds the values the launch left there, so the adjoint's replay needs no compare. Every
write of a primal field is announced before it happens (a launch's write boxes, from its IR; a
Python-scope write through `python_will_write`; a tangent launch, by field): the reads it may
overlap are copied then, just before their values can change, and compared after it (inside the
Tape, naming the writer) or at the replay (marked `dirty`). A read whose copy has been made and
that a write outside the Tape may have changed needs no further attention from later writes, so
it leaves the index: the index holds only reads that a write must still look at.

Reads are filed per field, and by leading index when they span few rows: a time-indexed program
writes row t + 1 while the reads of rows 0..t wait for the backward pass, and a write must not
look at all of them (that would grow as T^2).
"""
from __future__ import annotations

import numpy as np

from tinyad.check.boxes import boxes_overlap
from tinyad.check.regions import NARROW_ROWS


class ReplayedRead:
    """A box one launch's adjoint replays, and what the checker knows of it."""

    __slots__ = ("launch", "site", "field", "box", "slices", "rows", "values", "nbytes", "dirty",
                 "reported", "tape", "holders", "live")

    def __init__(self, launch, planned, tape):
        self.launch = launch
        # what tinyad/check/regions.py's PlannedRead says of the box (copied: read on every write)
        self.site, self.field, self.box = planned.site, planned.field, planned.box
        self.slices, self.rows = planned.slices, planned.rows
        self.values = None     # None: no write that may overlap the box since: unchanged
        self.nbytes = 0        # bytes of `values` this read holds (0: shared with another's)
        self.dirty = False     # a write may have changed the box since the copy: compare it
        self.reported = False  # blamed in a report already: not reported again
        # the number of the Tape the launch was recorded in (0: none); not the Tape's log,
        # which would keep every launch of that Tape alive as long as one read of it is filed
        self.tape = tape
        self.holders = 0       # the launches standing on this read not let go (equal values)
        self.live = True       # still filed in the index


_NO_ROWS = (float("inf"), float("-inf"))     # a span of no leading index
_ALL_ROWS = (float("-inf"), float("inf"))    # of every one (a 0-D field's read)


class FieldReads:
    """The reads of one field that writes must still look at."""

    NARROW = NARROW_ROWS

    __slots__ = ("count", "dead", "hi", "lo", "rows", "wide")

    def __init__(self):
        self.rows: dict = {}      # leading index -> [ReplayedRead]
        self.wide: list = []      # reads spanning more rows (or a 0-D field's)
        self.count = 0            # filed
        self.dead = 0             # filed but no longer live (dropped lazily)
        # The leading indices of every read filed, as one span [lo, hi) (kept by `add`, made
        # exact again by `compact`): a write of rows outside it overlaps none, which the
        # checker asks before `overlapping` (a time step writing row t + 1 while one read of
        # a later row, an untaped forward's, waits for its .grad()).
        self.lo, self.hi = _NO_ROWS

    def add(self, read: ReplayedRead) -> None:
        self.count += 1
        box = read.box
        lo, hi = box[0] if box else _ALL_ROWS
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
        if read.rows is None:
            self.wide.append(read)
            return
        rows = self.rows
        for row in read.rows:
            held = rows.get(row)
            if held is None:
                rows[row] = [read]
            else:
                held.append(read)

    def overlapping(self, box) -> list:
        """The live reads a write of `box` (None: the whole field) may overlap."""
        if box is None or not box or box[0][1] - box[0][0] > self.NARROW or not self.rows:
            if self.dead:
                self.compact()
            found, seen = list(self.wide), set()
            for held in self.rows.values():
                for r in held:
                    if r.live and id(r) not in seen:
                        seen.add(id(r))
                        found.append(r)
        else:
            wide = self.wide
            if wide:
                found = [r for r in wide if r.live]
                if len(found) < len(wide):
                    self.wide = found[:]
            else:
                found = []
            rows, (lo, hi) = self.rows, box[0]
            if hi - lo == 1 and lo not in rows:   # the common case: a write of an unread row
                return [r for r in found if boxes_overlap(box, r.box)] if found else found
            seen, several = set(), hi - lo > 1
            for row in range(lo, hi):
                held = rows.get(row)
                if not held:
                    continue
                alive = [r for r in held if r.live]
                if len(alive) < len(held):      # drop what no longer needs looking at
                    if alive:
                        rows[row] = alive
                    else:
                        del rows[row]
                for r in alive:
                    if several:                 # (a read spanning rows is filed in each)
                        if id(r) in seen:
                            continue
                        seen.add(id(r))
                    found.append(r)
        if box is None:
            return found
        overlap = boxes_overlap
        return [r for r in found if overlap(box, r.box)]

    def compact(self) -> None:
        """Drop the reads no longer live (most rows are never written again)."""
        rows = {}
        for row, held in self.rows.items():
            alive = [r for r in held if r.live]
            if alive:
                rows[row] = alive
        self.rows = rows
        self.wide = [r for r in self.wide if r.live]
        self.count = len(self.wide) + sum(len(h) for h in rows.values())
        self.dead = 0
        self.lo, self.hi = _NO_ROWS
        for read in self.wide:
            lo, hi = read.box[0] if read.box else _ALL_ROWS
            self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
        if rows:
            self.lo, self.hi = min(self.lo, min(rows)), max(self.hi, max(rows) + 1)


class ReadIndex:
    """field -> the reads writes of it must look at (FieldReads)."""

    def __init__(self):
        self.fields: dict = {}

    def add(self, read: ReplayedRead) -> None:
        held = self.fields.get(read.field)
        if held is None:
            held = self.fields[read.field] = FieldReads()
        held.add(read)

    def overlapping(self, fld, box) -> list:
        held = self.fields.get(fld)
        return held.overlapping(box) if held is not None else []

    def retire(self, read: ReplayedRead) -> None:
        """`read` needs no more attention from writes."""
        if read.live:
            read.live = False
            held = self.fields.get(read.field)
            if held is not None:
                held.dead += 1
                if held.dead == held.count:    # (a Tape's reads let go: a write finds none)
                    del self.fields[read.field]
                elif held.dead > 1024 and held.dead * 2 > held.count:
                    held.compact()


class CopyBuffers:
    """The arrays that hold copies of replayed reads, used again once no read holds them. A
    recomputing sweep (mpm's) copies the same grid boxes at every step, 44 MB a run, and a
    fresh array's first write of each page is a page fault: 30-40 ms of system time a run."""

    KEPT = 64 << 20      # bytes of arrays no read holds, kept for the next copies (at most)

    def __init__(self):
        self.held: dict = {}     # id(array) -> [array, how many reads hold it]
        self.free: dict = {}     # (shape, dtype) -> [arrays no read holds]
        self.free_bytes = 0

    def copy(self, source: np.ndarray) -> np.ndarray:
        """A copy of `source`, held by no read yet (`hold` each read that takes it); a 0-D
        field's one value is not pooled."""
        if not isinstance(source, np.ndarray):
            return source.copy()
        spare = self.free.get((source.shape, source.dtype))
        if spare:
            array = spare.pop()
            self.free_bytes -= array.nbytes
            np.copyto(array, source)
        else:
            array = source.copy()
        self.held[id(array)] = [array, 0]
        return array

    def hold(self, array: np.ndarray) -> None:
        entry = self.held.get(id(array))
        if entry is not None:
            entry[1] += 1

    def let_go(self, array: np.ndarray) -> None:
        """A read no longer holds `array` (a view of a whole-field copy is not pooled)."""
        entry = self.held.get(id(array))
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del self.held[id(array)]
            if self.free_bytes + array.nbytes <= self.KEPT:
                self.free.setdefault((array.shape, array.dtype), []).append(array)
                self.free_bytes += array.nbytes


def in_field(box: tuple, relative) -> tuple:
    """A position in `box` as the field's index, then a vector's or matrix's component (as
    interp names an element)."""
    return tuple(lo + int(i) for i, (lo, _) in zip(relative, box)) + \
        tuple(int(i) for i in relative[len(box):])
