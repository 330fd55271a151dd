"""The rule checker of both modes: the launch checks (tinyad/check/launches.py) plus a witness
for the replayed reads, whose copies and compares are numpy's (fast mode's compiled replays
compile them into the program: tinyad/checkedreplay.py).

The witness: every element an adjoint replays must hold, when the adjoint runs, the value the
forward launch left there. Per kernel the IR gives the box each replayed load may read, as a
function of the launch's integer arguments (tinyad/check/regions.py, from check/boxes.py `box`:
affine indices give their range, a gather its whole dimension). After each forward launch those
boxes wait, unfiled, with only their leading indices summed up per field: most are never
written again before the backward pass (a kernel at step t reads row t, the next writes row
t + 1), and a read no write came near needs nothing. A write that may come near waiting rows
files them all first (tinyad/check/readwitness.py; the field still holds what they read). Nothing
is copied then either: a filed box is copied just before a write that may overlap it (a
launch's write boxes, a Python-scope write, a tangent launch), and compared:
  * inside a Tape, right after that write: the writer is known, so the report names it and the
    rule (1, 2, read during accumulation);
  * before the launch's adjoint, if a write outside the Tape's compares may have changed it (a
    kernel outside the Tape, a write before a manual .grad()): a replay divergence, blamed on
    the latest possible writer. A box no write overlapped since is the forward's still.
What happens within one launch (a read, then a store to the same element; two parallel
iterations on one element) the boxes settle where they can, and an iteration overwriting its
own element the values before and after the launch (`own_overwrite`); otherwise the launch
records its accesses (tinyad/check/accessrecord.py, judged by tinyad/check/trail.py).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from tinyad.check import changes, trail
from tinyad.check.changes import differences, value_at
from tinyad.check.launches import Launch, LaunchChecker
from tinyad.check.report import Access
from tinyad.check.customstores import CustomGradientStores
from tinyad.check.iterations import launch_iteration, written_access
from tinyad.check.pointcopies import PointCopies
from tinyad.check.readevidence import (
    FirstReadReports,
    changed_and_read,
    in_trail_order,
    in_writer_order,
)
from tinyad.check.readwitness import CopyBuffers, ReadIndex, ReplayedRead, in_field
from tinyad.check.regions import KernelRegions, LaunchPlan, Written, leading_span
from tinyad.core import ir
from tinyad.notices import note


class TapeLog:
    """The launches inside one Tape, in order: the checker's list of them (LaunchChecker.taped;
    the reads they replay are filed in the checker's ReadIndex, each with the Tape it belongs
    to; what each wrote is its `writes`)."""

    def __init__(self, launches: list):
        self.launches = launches

    def writes_before(self, fld, element: tuple, time: int) -> list:
        """[(Launch, Written)] of the writes that may cover fld[element] (`fld` a field, or
        its name) by this Tape's launches before `time`, in order (for a report)."""
        same = (lambda f: f.name == fld) if isinstance(fld, str) else (lambda f: f is fld)
        return [(launch, w) for launch in self.launches if launch.time < time
                for w in launch.writes if same(w.site.field) and w.covers(element)]


def _size(box: tuple) -> int:
    size = 1
    for lo, hi in box:
        size *= hi - lo
    return size


def _counting(more: list, error):
    """`error`, carrying the other elements the same compare found changed (warn mode counts
    a bug's elements)."""
    error.more_elements = more
    return error


class WitnessChecker(FirstReadReports, CustomGradientStores, PointCopies, LaunchChecker):
    """The launch checks' memory plus the replayed reads' witness (one per ti.init)."""

    # The copies kept for adjoints not yet run, at most (oldest launches' copies go first).
    MEMORY_BUDGET = 1 << 30

    def __init__(self, mode: str, host):
        super().__init__(mode)
        self.host = host                 # field -> its host array, current (the storage's)
        self.python_writes: dict = {}    # field -> Written of its latest 64 Python-scope writes
        self.reads = ReadIndex()         # replayed reads that a write must copy first
        self.buffers = CopyBuffers()     # the arrays of their copies, used again
        self.kept: deque = deque()       # launches whose reads are filed, oldest first
        self.kept_bytes = 0              # bytes of the copies they hold
        self.dropped_noted = False
        # Every write of a primal field (a launch that may store into it, a Python write) gives
        # it a new version: what a launch let go of read is still there if none is later
        # (`_check_released_replay`).
        self.versions: dict = {}         # field -> version
        self.next_version = iter(range(1, 1 << 62)).__next__
        # Replayed reads not filed yet, as no write has come near them (after_forward): per
        # field, the hull of the leading indices they span (waiting_spans: field -> (lo, hi)),
        # and the launches holding them, in order (waiting; some let go since: waiting_live
        # still wait)
        self._no_waiting()
        self.released_noted: set = set()  # kernels told a re-differentiation is unchecked

    def wrote(self, fields) -> None:
        for fld in fields:
            self.versions[fld] = self.next_version()

    def before_write(self, fld) -> None:
        """Python scope (or a tangent launch) is about to write some of `fld`: which elements
        is not known yet, so every replayed read of it not yet copied is copied now."""
        if fld.role != "primal":     # (only primal fields' writes are followed)
            return
        super().before_write(fld)    # (the gradient points: PointCopies)
        if fld in self.waiting_spans:
            self._file_waiting()
        if not self.reads.fields:      # (none filed, mostly)
            return
        waiting = [r for r in self.reads.overlapping(fld, None) if r.values is None]
        if not waiting:
            return
        current = self.host(fld)
        if sum(_size(r.box) for r in waiting) * 4 < _size(tuple((0, n) for n in fld.shape)):
            made: dict = {}
            for read in waiting:
                self._copy(read, made)
        else:            # most of the field: one copy, each read a view of it
            whole = current.copy()
            self.kept_bytes += whole.nbytes
            waiting[0].nbytes = whole.nbytes
            for read in waiting:
                read.values = whole[read.slices]
        if self.kept_bytes > self.MEMORY_BUDGET:
            self._keep_within_budget()

    def tangent_wrote(self, fields) -> None:
        """A forward-mode launch wrote these primal fields (compared at the replays only)."""
        self.wrote(fields)
        for fld in fields:
            for read in self.reads.overlapping(fld, None):
                self._may_have_changed(read)

    def _copy(self, read: ReplayedRead, made: dict) -> None:
        """Copy the box of `read` (about to be overwritten): `made` shares one copy between
        the reads of one box that one write copies."""
        key = (read.field, read.box)
        values = made.get(key)
        if values is None:
            values = made[key] = self.buffers.copy(self.host(read.field)[read.slices])
            read.nbytes = values.nbytes
            self.kept_bytes += values.nbytes
        self.buffers.hold(values)
        read.values = values

    def _may_have_changed(self, read: ReplayedRead) -> None:
        """A write outside the Tape's compares may have changed `read`: compared at its replay."""
        read.dirty = True
        self.reads.retire(read)

    def tape_scope(self):
        return TapeLog(self.taped)      # (begin_tape has made the new Tape's list)

    def tape_differentiated(self):
        """The Tape's backward pass has run: the reads its launches filed need no more watching
        (every later write would copy them for nothing). Its launches stay in the history for
        a manual .grad() of one again (`_check_released_replay`)."""
        log = self.differentiating      # (LaunchChecker.end_tape set it: None after)
        if log is not None and log.launches:
            stamp = self.next_version()      # every later write has a later version
            # (_replayed, inline for the usual launches: their reads wait still, or they
            # replay none; a call each costs a Tape of small launches more than the rest)
            let_go, usual = 0, not self.evidence_kept
            for launch in log.launches:
                if launch.released is not None:
                    continue
                held = launch.waiting
                if held is not None and usual:
                    launch.waiting = None
                    launch.released = (stamp, held[0].read_fields)
                    let_go += 1
                elif usual and not launch.snapshots:
                    launch.released = (stamp, ())
                else:
                    self._replayed(launch, stamp)
            if let_go:      # (as _release: none waiting, none to remember)
                self.waiting_live -= let_go
                if not self.waiting_live:
                    self._no_waiting()
        super().tape_differentiated()

    def superseded(self, launch: Launch) -> None:
        """Let go of it, as of a Tape's launches after its backward pass. A manual sweep kept
        every step's copies until its launches left the history: 490 MB for mpm, and a page
        fault for every new page of them."""
        if launch.released is None:
            self._replayed(launch, self.next_version())

    def _replayed(self, launch: Launch, stamp: int) -> None:
        """Let go of what `launch` read, noting which fields (version `stamp`) for a later
        .grad() of it again (`_check_released_replay`)."""
        fields = launch.waiting[0].read_fields if launch.waiting is not None else \
            tuple({read.field: None for read in launch.snapshots})   # (waiting or filed)
        self._release(launch)
        launch.released = (stamp, fields)

    def _check_released_replay(self, launch: Launch, kernel_name: str) -> None:
        """A .grad() of a launch differentiated already (by its Tape, or by hand): a field it
        replays that nothing wrote since still holds what it read; one written since cannot
        be compared any more (rare: keeping every Tape's copies after its backward pass would
        cost every Tape), and the user is told so."""
        stamp, fields = launch.released
        written = [f for f in fields if self.versions.get(f, 0) > stamp]
        if written and launch.compiled not in self.released_noted:
            self.released_noted.add(launch.compiled)
            note(f"{kernel_name}.grad() differentiates launch #{launch.number} again, after "
                 f"its adjoint ran; {written[0].name} has been written since, and what that "
                 "launch read of it is no longer kept, so this replay is not checked (launch "
                 f"{kernel_name} again before its .grad() to have it checked)")

    # ---- a forward launch ----------------------------------------------------------------------
    def before_launch(self, plan: LaunchPlan):
        """Copy the replayed reads the launch's writes may overlap, before they run; -> [(Written,
        [ReplayedRead])] for `after_forward`, or None."""
        spans = self.waiting_spans
        if spans:     # (_comes_near, inline: it runs at every launch)
            for fld, lo, hi in plan.write_spans:
                held = spans.get(fld)
                # (a time step writes the rows after those read: the first test fails)
                if held is not None and lo < held[1] and held[0] < hi:
                    self._file_waiting()
                    break
        fields = self.reads.fields
        if not fields:
            return None
        for fld, lo, hi in plan.write_spans:     # (a field's filed reads' rows, FieldReads.lo)
            held = fields.get(fld)
            if held is not None and lo < held.hi and held.lo < hi:
                break
        else:
            return None        # (a time step's write of rows no read is filed at)
        hits = None
        for written in plan.writes:
            held = fields.get(written.site.field)
            if held is None:
                continue
            found = held.overlapping(written.box)
            if not found:
                continue
            made: dict = {}
            for read in found:
                if read.values is None:
                    self._copy(read, made)
            if hits is None:
                hits = []
            hits.append((written, found))
        if hits is not None and self.kept_bytes > self.MEMORY_BUDGET:    # (none copied: none)
            self._keep_within_budget()
        return hits

    def after_forward(self, launch: Launch, plan: LaunchPlan, hits=None) -> None:
        """Compare the reads this launch's writes may have changed (`hits`, from
        before_launch): inside a Tape, naming this launch. The boxes its adjoint will replay
        wait, unfiled, until a write may come near their rows (`_comes_near`); most never do,
        and cost only their rows' spans. (One frame: this runs at every launch.)"""
        versions, version = self.versions, self.next_version()
        for fld in plan.written_fields:      # (one version a launch: only their order counts)
            versions[fld] = version
        launch.writes = plan.writes      # shared by the launches with these arguments
        launch.row_source = plan.row_source
        if hits:
            tape = self.tape
            for written, found in hits:
                self._after_write(written.site.field, found, launch, tape)
        if not plan.reads:
            return
        # Inside a grad_replaced function the Tape never replays these reads (its grad_for
        # recomputes what it needs): they are the launch's own, not the Tape's.
        if self.in_custom_primal:
            launch.waiting = (plan, 0, True)
        else:
            launch.waiting = (plan, 0 if self.tape is None else self.tapes, False)
        waiting = self.waiting
        waiting.append(launch)
        self.waiting_live += 1
        # (_widen, inline: this runs at every launch that replays a read)
        if plan.kernel in self.waiting_fixed:
            spans_read = plan.read_spans
        else:
            self.waiting_fixed.add(plan.kernel)
            spans_read = plan.spans_with_fixed
        if spans_read:
            spans = self.waiting_spans
            for fld, lo, hi in spans_read:
                held = spans.get(fld)
                if held is None:
                    spans[fld] = (lo, hi)
                    continue
                held_lo, held_hi = held
                if hi > held_hi:           # (a time step reads the row after the last one's)
                    spans[fld] = (min(lo, held_lo), hi)
                elif lo < held_lo:
                    spans[fld] = (lo, held_hi)
        if len(waiting) > self.waiting_limit:
            if self.waiting_live == len(waiting) and waiting[0].number >= \
                    self.history[0].number:      # none to drop (a Tape's, say): room for more
                self.waiting_limit = 2 * len(waiting) + 64
            else:
                self._respan_waiting()
        kept = self.kept          # (filed launches only: few leave the history at a time)
        if kept and (self.kept_bytes > self.MEMORY_BUDGET or (
                kept[0].number < self.history[0].number and not self.pinned(kept[0]))):
            self._keep_within_budget()

    def _widen(self, plan: LaunchPlan) -> None:
        """Widen the waiting rows' hulls, per field (lo, hi), by the rows a launch with `plan`
        reads: its kernel's fixed ones once, the ones its arguments move each time. A hull,
        not the rows exactly: a write inside it between read rows files the reads early, never
        late. (after_forward does the same inline.)"""
        first = plan.kernel not in self.waiting_fixed
        self.waiting_fixed.add(plan.kernel)
        spans = self.waiting_spans
        for fld, lo, hi in plan.spans_with_fixed if first else plan.read_spans:
            held = spans.get(fld, (lo, hi))
            spans[fld] = (min(lo, held[0]), max(hi, held[1]))

    def _comes_near(self, fld, box) -> bool:
        """May a write of `box` (None: any part) of `fld` meet a waiting read's rows?"""
        held = self.waiting_spans.get(fld)
        if held is None or box is None:
            return held is not None
        lo, hi = leading_span(box)
        return held[0] < hi and lo < held[1]

    def _file_waiting(self) -> None:
        """A write may come near waiting reads: file them all, as they are still what their
        launches read (no write came near them since). The reads of one box in one Tape
        are one read, the first launch's: one copy, one compare, one report."""
        waiting, shared, index = self.waiting, {}, self.reads
        self._no_waiting()
        for launch in waiting:
            if launch.waiting is None:       # let go since
                continue
            plan, tape, custom = launch.waiting
            launch.waiting = None
            reads = launch.snapshots = []
            for planned in plan.reads:
                read = None if custom else shared.get((planned, tape))
                if read is None:
                    read = ReplayedRead(launch, planned, tape)
                    index.add(read)
                    if not custom:
                        shared[(planned, tape)] = read
                read.holders += 1
                reads.append(read)
            self.kept.append(launch)      # (in launch order: each batch follows the last)
        self._keep_within_budget()        # (those that left the history meanwhile go now)

    def _no_waiting(self) -> None:
        self.waiting, self.waiting_spans, self.waiting_live = [], {}, 0
        self.waiting_fixed = set()
        self.waiting_limit = 64       # launches `waiting` holds before `_respan_waiting`

    def _respan_waiting(self) -> None:
        """Drop from `waiting` the launches let go, and those that left the history (no manual
        .grad() finds them; a Tape's are kept until it differentiates them), and their rows
        from the spans."""
        first = self.history[0].number
        live = []
        for launch in self.waiting:
            if launch.waiting is not None:
                if launch.number >= first or self.pinned(launch):
                    live.append(launch)
                else:
                    launch.waiting = None
        self._no_waiting()
        self.waiting, self.waiting_live = live, len(live)
        self.waiting_limit = 2 * len(live) + 64
        for launch in live:
            self._widen(launch.waiting[0])

    def _after_write(self, fld, found, writer: Launch | None, tape, access=None) -> None:
        """After a write that may have changed the reads `found` (copied before it): each
        element changed that a launch of this Tape read is reported with its first read, the
        one the writer changed first first (the first change a serial run would make)."""
        mine = []
        for read in found:
            if read.reported or read.values is None:   # (None: no before-write call copied it)
                continue
            if tape is None or read.tape != self.tapes:
                self._may_have_changed(read)
            elif read.launch is not writer:
                mine.append(read)
        if not mine:
            return
        changed, touched = changed_and_read(fld, mine, self.host(fld), self.evidence)
        for read in touched:           # a changed read is reported once
            read.reported = True
            self.reads.retire(read)
        if writer is not None:
            changed = in_writer_order(fld, changed, writer)
        for first, more in self._by_read(changed):
            read_access = self._first_access(first)
            element, now = first.element, value_at(self.host(fld), first.element)
            if writer is None:       # a Python-scope write inside the Tape (the judge's)
                error = changes.python_overwrite(fld.name, element, read_access, access, now)
                if error is not None:
                    self.report(_counting(more, error))
                continue
            self.report(_counting(more, self._overwrite_error(fld, element, read_access,
                                                              writer, now)))

    def _read_access(self, read: ReplayedRead, relative: tuple, launch=None) -> Access:
        launch = launch or read.launch    # (launches that read equal values share a read)
        return Access("read", read.site.node.loc, launch.kernel, launch.number,
                      launch_iteration(read.site, in_field(read.box, relative), launch),
                      value_at(read.values, relative), launch.time)

    def _overwrite_error(self, fld, element, read: Access, writer: Launch, now):
        """Which rule a later launch's write of a replayed element breaks (as interp says),
        given the Tape's writes of it up to the read's own launch."""
        mine = [w for w in writer.writes if w.site.field is fld and w.covers(element)]
        write = written_access(writer, mine[0] if mine else None, element, now)
        earlier = self.tape.writes_before(fld, element, read.time + 1)
        return trail.changed_after_read(fld.name, element, read, write,
                                        [w.kind for _, w in earlier],
                                        lambda k: written_access(*earlier[k], element))

    # ---- Python scope ----------------------------------------------------------------------------
    def python_write(self, fld, index, loc=None) -> Access | None:
        if fld.role != "primal":     # what the launch checks need of it (no source line: slow)
            if fld.role == "grad":
                self.gradients_cleared((fld,), self.tick())
                self.lost.gradient_written(fld, index, loc)
            return None
        access = super().python_write(fld, index, loc)
        self.versions[fld] = self.next_version()      # (wrote, inline)
        box = None if index is None else tuple((i, i + 1) for i in index)
        # (before_write filed them: not if it was skipped; none wait, mostly: no call then)
        if self.waiting_spans and self._comes_near(fld, box):
            self._file_waiting()
        log = self.python_writes.get(fld)
        if log is None:
            log = self.python_writes[fld] = deque(maxlen=64)
        log.append(Written(None, box, "python write", access))
        if self.reads.fields:          # (none filed, mostly: no call then)
            found = self.reads.overlapping(fld, box)
            if found:
                self._after_write(fld, found, None, self.tape, access)
        return access

    # ---- before an adjoint ---------------------------------------------------------------------
    def _keep_within_budget(self) -> None:
        """Launches are let go when they leave the history (launches.HISTORY), but not those
        of the latest Tape before its backward ran (it replays them however long it is);
        before that, if their copies pass the budget (a kernel gathering from a huge field),
        the oldest are let go, and said so."""
        first_kept = self.history[0].number if self.history else 0
        while self.kept and (self.kept_bytes > self.MEMORY_BUDGET or (
                self.kept[0].number < first_kept and not self.pinned(self.kept[0]))):
            oldest = self.kept.popleft()
            if oldest.snapshots and oldest.number >= first_kept and not self.dropped_noted:
                self.dropped_noted = True
                note(f"the checker's copies of what adjoints replay passed "
                     f"{self.MEMORY_BUDGET >> 20} MiB; the oldest launches' (from "
                     f"{oldest.kernel}, launch #{oldest.number}) are dropped, so their "
                     "replays go unchecked")
            self._release(oldest)

    def _release(self, launch: Launch) -> None:
        """Let go of the reads `launch` filed or left waiting: no replay of it is checked from
        now on."""
        if self.evidence_kept:      # (empty, mostly: a call per launch let go costs more)
            self.evidence_kept.pop(launch.number, None)
        if launch.waiting is not None:
            launch.waiting = None
            self.waiting_live -= 1
            if not self.waiting_live:
                self._no_waiting()
        for read in launch.snapshots:
            read.holders -= 1
            if not read.holders:          # (another launch standing on it keeps it)
                self.reads.retire(read)
                self.kept_bytes -= read.nbytes
                if read.values is not None:
                    self.buffers.let_go(read.values)
                read.nbytes, read.values, read.reported = 0, None, True
        launch.snapshots = ()

    def own_overwrite(self, regions: KernelRegions, fld, before: np.ndarray, launch: Launch):
        """After a launch whose iterations each may overwrite their own element of `fld` after
        reading it for the adjoint (regions.own_overwrites): Rule 1 at the first element whose
        value changed, or None. `before`: the field's values before the launch."""
        now = self.host(fld)
        where = differences(before, now)
        if where is None:
            return None
        element = tuple(int(i) for i in where[0])
        read_site, write_site = regions.own_overwrites[fld]
        kind = "store" if isinstance(write_site.node, ir.Store) else "atomic_" + write_site.node.op
        # (an iteration's own element: no write of it comes before the read)
        error = trail.changed_after_read(
            fld.name, element,
            Access("read", read_site.node.loc, launch.kernel, launch.number,
                   launch_iteration(read_site, element, launch), value_at(before, element),
                   launch.time),
            Access(kind, write_site.node.loc, launch.kernel, launch.number,
                   launch_iteration(write_site, element, launch), value_at(now, element),
                   launch.time))
        more = [tuple(int(i) for i in row) for row in where[1:]] if self.mode == "warn" else []
        return _counting(more, error)

    def _changed_reads(self, launch: Launch, fields=None) -> list:
        """The elements `launch`'s adjoint replays (of `fields`; None: all) that a write may
        have changed outside the Tape's compares and that hold another value now, each with
        the launch's first read of it, in its trail's order (a serial run's): [(field,
        FirstRead)]. A changed read is reported once."""
        by_field: dict = {}
        wanted = None if fields is None else {id(f) for f in fields}
        for read in launch.snapshots:
            if not read.reported and read.dirty and (wanted is None or id(read.field) in wanted):
                by_field.setdefault(read.field, []).append(read)
        found = []
        for fld, reads in by_field.items():
            changed, touched = changed_and_read(fld, reads, self.host(fld),
                                                lambda _, fld: self.evidence(launch, fld))
            for read in touched:
                read.reported = True
            found += [(fld, first) for first in changed]
        found.sort(key=lambda f: in_trail_order(f[1]))
        return found

    def changed_read(self, launch: Launch, fields):
        found = self._changed_reads(launch, fields)
        if not found:
            return None
        fld, first = found[0]
        return (fld, first.element, self._first_access(first, launch),
                value_at(self.host(fld), first.element),
                self._last_writer(fld, first.element, launch.time))

    def check_replay(self, launch: Launch | None, kernel_name: str) -> None:
        """Every box the adjoint replays must still hold what the forward launch left there:
        only a read that a write may have changed outside the Tape's compares needs a look.
        The first changed, and in warn mode each of its loads' other changed elements with
        it; the judge decides (check/changes.py)."""
        if launch is None:
            return
        if launch.released is not None:     # its Tape's backward has run: no reads kept
            self._check_released_replay(launch, kernel_name)
            return
        if launch.waiting is not None:      # no write came near what it read: unchanged
            return
        for (fld, first), more in self._by_read(self._changed_reads(launch), launch=True):
            element = first.element
            error = changes.replay_divergence(
                kernel_name, fld.name, element, self._first_access(first, launch),
                value_at(self.host(fld), element),
                self._last_writer(fld, element, launch.time))
            if error is not None:
                self.report(_counting(more, error))

    def _last_writer(self, fld, element, since: int) -> Access | None:
        """The latest launch after `since` whose facts say it may write `element`, or the latest
        Python-scope write of it, whichever came last."""
        best = None
        for w in reversed(self.python_writes.get(fld, ())):
            if w.access.time > since and w.covers(element):
                best = w.access
                break
        for later in reversed(self.history):
            if later.time <= since or (best is not None and later.time < best.time):
                break
            mine = [w for w in later.writes if w.site.field is fld and w.covers(element)]
            if mine:
                return written_access(later, mine[0], element)
        return best

    def boxes_written_since(self, fld, time: int):
        if not self.history or self.history[0].time > time:
            return None      # launches since then have left the history: unknown
        boxes = set()
        for w in self.python_writes.get(fld, ()):
            if w.access.time > time:
                if w.box is None:
                    return None
                boxes.add(w.box)
        for later in reversed(self.history):
            if later.time <= time:
                break
            for w in later.writes:
                if w.site.field is fld:
                    boxes.add(w.box)
        return sorted(boxes)

