"""Which elements a launch's replayed loads read, and which read came first: what the replay
witness's reports name, found only when a report needs it.

The witness keeps copies of the boxes a launch's adjoint replays (tinyad/check/readwitness.py),
not of the elements it read: a gather reads part of its box, a load in a branch not taken or on the
side of a `ti.select` not chosen reads nothing. When a compare finds an element of a box
changed, the report must name a read that happened (none may have: then nothing is reported)
and the first one. So the launch is run again, once, as the variant of its
kernel that records its replayed loads (tinyad/check/accessrecord.py), on the values it read: the
fields as they are now, with the copies of what it read put back where writes have changed them
since (a copy is made before the first write that may change a box, so each holds what the
launch read). Every field the kernel touches, and the random stream, are put back afterwards.
A program that breaks no rule never pays for this.

The first read is the first along the launch's trail (tinyad/check/trail.py): segments in
order, a parallel loop's iterations by the loop variable, each iteration's accesses in program
order: the order of a serial run.

A kernel that draws random numbers cannot be run again on the same stream: no evidence (the
reports then name the box's reads as before).
"""
from __future__ import annotations

import numpy as np

from tinyad.analysis.sites import access_sites
from tinyad.check import trail
from tinyad.check.changes import differences, value_at
from tinyad.check.report import Access
from tinyad.check.trail import Trail
from tinyad.check.iterations import first_iterations, written_access
from tinyad.core import ir


class ReadEvidence:
    """One launch's replayed reads: per field, the elements read and each one's first read."""

    def __init__(self, trail: Trail):
        self.trail = trail
        # field -> (the flat indices read, sorted; the trail position of each one's first read)
        self.fields: dict = {}
        for fld in {id(s.field): s.field for s in trail.sites}.values():
            at = trail.of_field(fld)          # (ascending: trail order)
            flat, first = np.unique(trail.flat[at], return_index=True)
            self.fields[fld] = (flat, at[first])

    def positions(self, fld, wanted: np.ndarray) -> np.ndarray:
        """The trail position of the launch's first read of each flat index `wanted`, -1 for
        an element it did not read."""
        out = np.full(wanted.size, -1, np.int64)
        entry = self.fields.get(fld)
        if entry is None or not wanted.size:
            return out
        flat, positions = entry
        k = np.minimum(np.searchsorted(flat, wanted), max(flat.size - 1, 0))
        found = flat[k] == wanted if flat.size else np.zeros(wanted.size, bool)
        out[found] = positions[k[found]]
        return out

    def access(self, launch, position: int, value) -> Access:
        """The read at `position` as a report names it (`value`: what it read, as the field's
        copy holds it)."""
        return self.trail.access(launch, position, value)


class FirstRead:
    """A changed element that a launch read, and the read that came first."""
    __slots__ = ("element", "read", "relative", "position", "site")

    def __init__(self, element, read, relative, position, site):
        self.element = element        # its index in the field (components included)
        self.read = read              # the ReplayedRead whose copy holds what was read
        self.relative = relative      # its position in that read's box
        self.position = position      # of the first read in its launch's trail (None: unknown)
        self.site = site              # the load that made it (a TrailSite, or the read's site)


def changed_and_read(fld, reads: list, now: np.ndarray, evidence_of) -> tuple[list, list]:
    """The elements of `fld` that `reads`' copies hold other values of `now`, and that their
    launches did read (`evidence_of(launch, fld)`: ReadEvidence, or None where unknown: then
    every element of the box counts as read, by its site): -> ([FirstRead], by element; the
    reads that found a change of an element read). Of an element's reads, the first
    launch's first."""
    dims = tuple(fld.shape) + tuple(fld.element_shape)
    parts = []     # (flat, launch number, position, program order, which read, relative rows)
    for n, read in enumerate(reads):
        where = differences(read.values, now[read.slices])
        if where is None:
            continue
        lows = np.array([lo for lo, _ in read.box] + [0] * (where.shape[1] - len(read.box)),
                        np.int64)
        flat = np.ravel_multi_index(tuple((where + lows).T), dims).astype(np.int64) \
            if dims else np.zeros(len(where), np.int64)
        evidence = evidence_of(read.launch, fld)
        if evidence is None:
            position = np.zeros(flat.size, np.int64)
        else:
            position = evidence.positions(fld, flat)
            read_there = position >= 0
            flat, position, where = flat[read_there], position[read_there], where[read_there]
        if flat.size:
            loc = read.site.node.loc
            order = (loc.line, loc.col) if evidence is None and loc is not None else (0, 0)
            parts.append((flat, read.launch.number, position, order, n, where,
                          evidence is not None))
    if not parts:
        return [], []
    flat = np.concatenate([p[0] for p in parts])
    number = np.concatenate([np.full(p[0].size, p[1], np.int64) for p in parts])
    position = np.concatenate([p[2] for p in parts])
    line = np.concatenate([np.full(p[0].size, p[3][0], np.int64) for p in parts])
    col = np.concatenate([np.full(p[0].size, p[3][1], np.int64) for p in parts])
    part = np.concatenate([np.full(p[0].size, k, np.int64) for k, p in enumerate(parts)])
    row = np.concatenate([np.arange(p[0].size) for p in parts])
    order = np.lexsort((col, line, position, number, flat))
    first = order[np.unique(flat[order], return_index=True)[1]]
    found = []
    for at in first:
        p = parts[int(part[at])]
        read = reads[p[4]]
        relative = tuple(int(i) for i in p[5][int(row[at])])
        element = np.unravel_index(int(flat[at]), dims) if dims else ()
        if p[6]:
            trail = evidence_of(read.launch, fld).trail
            at_trail = int(position[at])
            found.append(FirstRead(tuple(int(i) for i in element), read, relative, at_trail,
                                   trail.sites[int(trail.site[at_trail])]))
        else:
            found.append(FirstRead(tuple(int(i) for i in element), read, relative, None,
                                   read.site))
    return found, [reads[p[4]] for p in parts]


class FirstReadReports:
    """What the checker (tinyad/check/replaycheck.py) needs of evidence for its reports:
    each launch's, found once (`evidence_of`, which the backend gives), and the reads a report
    names."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.evidence_of = lambda launch, fld: None     # (the backend's; none known without)
        # launch number -> {field: ReadEvidence or None}
        self.evidence_kept: dict = {}

    def evidence(self, launch, fld):
        """What `launch` read of `fld`, found once, or None where unknown."""
        kept = self.evidence_kept.setdefault(launch.number, {})
        if fld not in kept:
            kept[fld] = self.evidence_of(launch, fld)
        return kept[fld]

    def _by_read(self, changed: list, launch=False) -> list:
        """[(FirstRead, the other elements whose first read is at the same load)], in the
        order of each group's first; in error mode (which reports one) the first alone. With
        `launch`, the items are (field, FirstRead) of one launch's reads."""
        if self.mode != "warn":
            return [(changed[0], [])] if changed else []
        groups: dict = {}
        for item in changed:
            first = item[1] if launch else item
            key = (id(item[0]) if launch else first.read.launch.number, id(first.site))
            if key not in groups:
                groups[key] = (item, [])
            else:
                groups[key][1].append(first.element)
        return list(groups.values())

    def _first_access(self, first, launch=None):
        """The read a report names: the first along its launch's trail where that is known,
        else the read's site, at the iteration its indices give. (`launch`: the one whose
        adjoint replays it, where launches that read equal values share a read.)"""
        read = first.read
        launch = launch or read.launch
        value = value_at(read.values, first.relative)
        if first.position is None:
            return self._read_access(read, first.relative, launch)
        return self.evidence(launch, read.field).access(launch, first.position, value)


    def with_earlier_writes(self, error, launch):
        """An overwrite a launch made within itself (its trail, or its own elements compared),
        told again with the writes of the element earlier in the Tape: a store in an earlier
        launch, then the read and a store in this one, is Rule 2, as the whole Tape has it (the
        launch alone shows Rule 1)."""
        r = error.report
        if self.tape is None or r.rule not in OVERWRITES or r.read is None or \
                r.write is None:
            return error
        earlier = self.tape.writes_before(r.field, r.element, launch.time)
        if not earlier:
            return error
        # then the launch's own write the report names (Rule 2: its first write; a read during
        # accumulation: its first +=), after the Tape's earlier launches'
        mine = list(r.earlier[:1])
        told = trail.changed_after_read(
            r.field, r.element, r.read, r.write,
            [w.kind for _, w in earlier] + [w.kind for w in mine],
            lambda k: written_access(*earlier[k], r.element) if k < len(earlier) else mine[0])
        told.more_elements = getattr(error, "more_elements", [])
        return told


# The reports of an element changed after a read the adjoint replays (rules.overwrite_after_read)
OVERWRITES = ("Global Data Access Rule 1", "Global Data Access Rule 2",
              "Read during accumulation")


def in_trail_order(first) -> tuple:
    """A FirstRead's place among one launch's reads: along its trail where known, else by the
    read's source position, then element."""
    if first.position is not None:
        return (first.position,)
    loc = first.read.site.node.loc
    return (-1, loc.line if loc else 0, loc.col if loc else 0, first.element)


def in_writer_order(fld, changed: list, writer) -> list:
    """`changed` (FirstReads, by element) in the order the writer launch's parallel loop wrote
    their elements (its least iteration, then its first store among several), as a serial run
    meets the first change: where the write's indices say; else as they are."""
    kernel = writer.compiled.ir
    sites = [s for s in access_sites(kernel)
             if s.field is fld and not isinstance(s.node, ir.Load)]
    solved = [first_iterations(s, kernel, writer.scalars) for s in sites]
    if not changed or not sites or any(x is None for x in solved):
        return changed
    dims = tuple(fld.shape) + tuple(fld.element_shape)
    flat = np.array([np.ravel_multi_index(f.element, dims) if dims else 0 for f in changed])
    best = np.full((flat.size, 2), np.iinfo(np.int64).max, np.int64)
    for number, (written, iteration) in enumerate(solved):
        k = np.minimum(np.searchsorted(written, flat), max(written.size - 1, 0))
        hit = (written[k] == flat) if written.size else np.zeros(flat.size, bool)
        key = np.stack([np.where(hit, iteration[k] if written.size else 0, best[:, 0]),
                        np.full(flat.size, number)], axis=1)
        better = hit & ((key[:, 0] < best[:, 0]) |
                        ((key[:, 0] == best[:, 0]) & (key[:, 1] < best[:, 1])))
        best[better] = key[better]
    order = np.lexsort((flat, best[:, 1], best[:, 0]))
    return [changed[int(k)] for k in order]


def draws_random(kernel) -> bool:
    return any(isinstance(x, ir.Op) and x.op == "random" for s in ir.walk_stmts(kernel.body)
               for e in ir.stmt_exprs(s) for x in ir.walk_expr(e))


def recorded_again(recorder, launch, storage, rng, prepare) -> ReadEvidence | None:
    """Run `launch` again as `recorder`'s variant (its kernel's replayed loads recorded) on the
    values it read, then put everything back: -> its evidence, or None where the recording
    outgrew what a launch may keep."""
    kernel = launch.compiled.ir
    fields = ir.fields_of(kernel.body)
    kept = [(fld, storage.snapshot(fld)) for fld in fields]
    state = rng.bit_generator.state
    try:
        _put_back_what_it_read(launch, storage)
        recorder.run(storage, launch.scalars, rng, prepare)
        if not recorder.complete:
            return None
        return ReadEvidence(recorder.trail(storage.to_host))
    finally:
        for fld, values in kept:
            storage.restore(fld, values)
        rng.bit_generator.state = state


def _put_back_what_it_read(launch, storage) -> None:
    """Each field the launch read holds again, in the boxes copied since, what it read."""
    copied: dict = {}
    for read in launch.snapshots:
        if read.values is not None:
            copied.setdefault(read.field, []).append(read)
    for fld, reads in copied.items():
        values = storage.to_host(fld).copy()
        for read in reads:
            values[read.slices] = read.values
        storage.assign(fld, values)
