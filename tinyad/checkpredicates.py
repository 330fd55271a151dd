"""The rule checks' reads of field values that decide something, as predicates a checked replay
compiles in (tinyad/checkedreplay.py), so that a call whose checks made them can be replayed.

A manual sweep that recomputes its forward steps (mpm's) makes three such checks per step:
  * before an adjoint, is its output's gradient seeded, a nonzero where the adjoint reads it
    (tinyad/check/adjoints.py `_seeded`)?
  * is a parameter still at the point its gradient was taken (`unchanged_since`: a compare with
    the copy the checker made of it before it was next written, tinyad/check/pointcopies.py)?
  * does a box an adjoint replays hold what its forward launch read (tinyad/check/replaycheck.py
    `check_replay`: a compare with the copy the checker made before a write came near it)?
While a call is watched (tinyad/checkwatch.py), `Predicates` wraps these and notes each outcome,
where in the call's events it came, and where the copy it compared was made. A replay makes the
same copies there (Stash events, into arrays of its own) and the same tests (Nonzero, Compare:
compile/replaypredicates.py); a test that comes out otherwise than in the watched call stops the
program, and the call runs plainly: its report is the plain one. Since every other check of
the call decides from indices, scalars and the checker's state, which a replay requires to be
as before, equal outcomes mean the checks run alike.

Only the outcomes of a clean call are replayed: a point found changed, or a replayed read found
changed but not reported (a change the launch did not read), keeps the call plain.
"""
from __future__ import annotations

import functools
import sys

from tinyad.check.changes import differences
from tinyad.sequence import Compare, Nonzero, Stash


@functools.cache
def _sites() -> dict:
    """The code of the checks whose reads of values are predicates -> which one."""
    from tinyad.check import adjoints
    from tinyad.check.launches import LaunchChecker
    from tinyad.check import pointcopies, replaycheck
    return {adjoints._seeded.__code__: "seed",
            pointcopies.PointCopies.unchanged_since.__code__: "point",
            LaunchChecker.unchanged_since.__code__: "point",
            replaycheck.WitnessChecker.check_replay.__code__: "replay",
            replaycheck.WitnessChecker._changed_reads.__code__: "replay"}


class Predicates:
    """The predicates of one watched call (`install`, the call, `uninstall`, `events`)."""

    def __init__(self, watch):
        self.watch, self.checker = watch, watch.checker
        self.inside = None      # the check running now whose reads are a predicate's
        self.seq = 0            # the order of what is noted (copies and tests at one place)
        self.tests: list = []   # (position, seq, event to make: a Nonzero, or a compare's)
        self.copied: dict = {}  # id(a replayed read) -> (read, copy) of the copies made
        self.patched: list = []  # (namespace, name, what it held) to put back

    # ---- while the call runs -------------------------------------------------------------------
    def install(self) -> None:
        from tinyad.check import adjoints, nonfinite
        from tinyad.check import replaycheck
        c = self.checker
        _sites()         # (found before the checks are wrapped: their own code)
        self._patch(vars(nonfinite), "_first_in", self._first_in(nonfinite._first_in))
        self._patch(vars(adjoints), "_seeded", self._seeded(adjoints))
        self._patch(vars(replaycheck), "changed_and_read",
                    self._changed_and_read(replaycheck.changed_and_read))
        self._patch(c.__dict__, "check_replay", self._within("replay", c.check_replay))
        self._patch(c.__dict__, "unchanged_since", self._unchanged_since(c.unchanged_since))
        self._patch(c.__dict__, "_copy", self._copy(c._copy))
        self._patch(c.__dict__, "before_write", self._before_write(c.before_write))

    def _patch(self, namespace: dict, name: str, replacement) -> None:
        self.patched.append((namespace, name, namespace.get(name, _ABSENT)))
        namespace[name] = replacement

    def uninstall(self) -> None:
        for namespace, name, held in reversed(self.patched):
            if held is _ABSENT:
                del namespace[name]
            else:
                namespace[name] = held
        self.patched = []

    def accepts(self, code) -> bool:
        """Is a read of values from `code` one of the predicate noted now?"""
        return self.inside is not None and _sites().get(code) == self.inside

    def _refuse(self, why: str) -> None:
        if self.watch.why_not is None:
            self.watch.why_not = why

    def _position(self) -> int:
        return self.watch._launch_at(sys._getframe(1), len(self.watch.recording.events))

    def _note(self, position: int, what) -> None:
        self.seq += 1
        self.tests.append((position, self.seq, what))

    def _within(self, check: str, method):
        def within(*args):
            outer, self.inside = self.inside, check
            try:
                return method(*args)
            finally:
                self.inside = outer
        return within

    def _first_in(self, original):
        """(Not a predicate: which rows a look for NaN looked at, so that a replay's looks
        there, and not at all of a large gradient each step.)"""
        def first_in(data, rows):
            self.watch.looked_in(data, rows)
            return original(data, rows)
        return first_in

    def _seeded(self, adjoints):
        original = adjoints._seeded
        seeded_inside = self._within("seed", original)

        def seeded(grad, launch):
            outcome = seeded_inside(grad, launch)
            boxes = adjoints.seeded_boxes(grad, launch)
            flat = () if boxes is None or not grad.shape else \
                sum((_flat(_full(grad, box)) for box in sorted(boxes)), ())
            self._note(self._position(), Nonzero(grad, bool(outcome), flat))
            return outcome
        return seeded

    def _unchanged_since(self, method):
        inside = self._within("point", method)

        def unchanged_since(primal, values, since):
            outcome = inside(primal, values, since)
            if not outcome:
                self._refuse(f"its checks found {primal.name} changed since a gradient was "
                             "taken there")
                return outcome
            position = self._position()
            for copy in self._point_copies(primal, values):
                self._note(position, ("same", copy))
            return outcome
        return unchanged_since

    def _point_copies(self, primal, values) -> list:
        """The copies (position, field, box) a gradient's point compared is made of."""
        watch = self.watch
        point = self.checker.partial_points.get(primal)
        if point is not None and point.values is values and not point.complete:
            done = watch.partial.get(id(point), [])
            starts = [i for i, (what, _, _) in enumerate(done) if what in ("init", "restart")]
            saved = {box: position for what, position, box in done[starts[-1] + 1:]
                     if what == "save"} if starts else {}
            if all(box in saved for box in point.saved):
                return [(saved[box], primal, _full(primal, box)) for box in sorted(point.saved)]
        elif id(values) in watch.point_copies:       # (a small field's, all of it at once)
            position, fld = watch.point_copies[id(values)]
            return [(position, fld, ())]
        self._refuse(f"its checks compared {primal.name} with values copied before the call")
        return []

    def _changed_and_read(self, original):
        def changed_and_read(fld, reads, now, evidence_of):
            if self.inside == "replay":
                self._replayed_reads(fld, reads, now)
            return original(fld, reads, now, evidence_of)
        return changed_and_read

    def _replayed_reads(self, fld, reads, now) -> None:
        position = self._position()
        for read in reads:
            copied = self.copied.get(id(read))
            if copied is None or copied[0] is not read:
                self._refuse(f"its checks compared {fld.name} with values copied before "
                             "the call")
            elif differences(read.values, now[read.slices]) is not None:
                self._refuse(f"its checks found {fld.name} changed where an adjoint replays "
                             "it (not where the forward read it)")
            else:
                self._note(position, ("close", copied[1]))

    def _copy(self, method):
        def copy(read, made):
            method(read, made)
            self._copied(read, self._position())
        return copy

    def _before_write(self, method):
        """Before a Python-scope write: the replayed reads it copies (a whole field's once)."""
        def before_write(fld):
            reads = self.checker.reads
            if fld.role != "primal":
                return method(fld)
            had = {id(r) for r in reads.overlapping(fld, None) if r.values is not None}
            method(fld)
            position = self._position()
            for read in reads.overlapping(fld, None):
                if read.values is not None and id(read) not in had and \
                        id(read) not in self.copied:
                    self._copied(read, position)
        return before_write

    def _copied(self, read, position: int) -> None:
        self.seq += 1
        self.copied[id(read)] = (read, (position, read.field, _full(read.field, read.box),
                                        self.seq))

    # ---- after it --------------------------------------------------------------------------
    def events(self, first_slot: int) -> tuple:
        """-> ([(position, event)] in order, [(slot, field, stash shape, dtype)]): the tests
        and the stashes they compare with, numbered from `first_slot`."""
        stashes: dict = {}      # (field, whole?) -> [slot, {copy: entry}, extent]
        made = []
        for position, seq, what in self.tests:
            if isinstance(what, Nonzero):
                made.append((position, seq, what))
                continue
            how, (at, fld, box, *copy_seq) = what
            key = (fld, not box)
            stash = stashes.setdefault(key, [first_slot + len(stashes), {}, None])
            copy = (at, box)
            if copy not in stash[1]:
                stash[1][copy] = entry = len(stash[1])
                made.append((at, copy_seq[0] if copy_seq else 0,
                             Stash(fld, stash[0], (entry, *_flat(box)))))
                stash[2] = _extent(stash[2], box)
            made.append((position, seq, Compare(fld, stash[0], how,
                                                (stash[1][copy], *_flat(box)))))
        made.sort(key=lambda m: (m[0], m[1]))
        shapes = [(slot, fld, _stash_shape(fld, len(entries), extent))
                  for (fld, _), (slot, entries, extent) in stashes.items()]
        return [(position, event) for position, _, event in made], shapes


_ABSENT = object()


def _full(fld, box) -> tuple:
    """`box` over every index of `fld` (a box may leave out its last indices: all of them)."""
    box = tuple((int(lo), int(hi)) for lo, hi in box)
    return box + tuple((0, n) for n in fld.shape[len(box):])


def _flat(box) -> tuple:
    return tuple(v for pair in box for v in pair)


def _extent(extent, box) -> tuple:
    sizes = tuple(hi - lo for lo, hi in box)
    return sizes if extent is None else tuple(max(a, b) for a, b in zip(extent, sizes))


def _stash_shape(fld, entries: int, extent) -> tuple:
    if not extent:            # (whole copies, flat)
        return (entries, int(fld.host_array.size))
    return (entries, *extent, *fld.element_shape)
