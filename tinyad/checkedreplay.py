"""A checked replay of a captured call: its program runs compiled, with the checks that depended
on values compiled into it, and the rule checker is left as the plain call would leave it.

ti.capture (tinyad/capture.py) runs a call plainly, fully checked, while tinyad/checkwatch.py
watches the checker. If the checks reported nothing and decided from field values only by
tests a replay can make again, a replay runs the same launches with the same scalars, so every check the checker made from
indices and scalars comes out as it did. What remains is compiled into the program:

  * where the call's checks looked for NaN and infinity in a gradient, the program looks
    (CheckFinite events); a look that finds one stops it, the fields it wrote are put back as
    they were (copied before it ran; a field whose first use is a whole fill needs no copy),
    so are the random numbers, and the call runs plainly instead: its report is the plain one;
  * where the checker copied a field that its state still holds after the call (the point at
    which a gradient was taken, compared at a later manual sweep), the program copies it (Copy
    events); so is a bad index, reported by the plain run's words;
  * where a manual sweep's checks tested values (a seed, a gradient's point, a replayed read:
    tinyad/checkpredicates.py), the program tests them again against copies of its own, and
    stops where one comes out otherwise: the call runs plainly, as for a NaN.

Then the checker is set as the call left it (`_apply`), its times moved to the replay's:
every entry of its state the call wrote. That is right only if the call would have read the
same entries as before, so a replay first compares them: each entry the watched call read
before writing must be as it was then, up to the order of their times; otherwise the call runs
plainly and is watched again (tinyad/replaystate.py: both as tables made once per call). A replay leaves no record of each launch (it would cost as
much as the checks): the checker forgets the launches made before it too, as it forgets those
that leave its history, and a kernel.grad() of one of them later says that it is not checked
(and the captured function runs plainly from then on). Before the first replay, a call that was
followed by a kernel.grad() (a manual sweep of the captured launches) is not replayed at all.
"""
from __future__ import annotations

import sys
from collections import deque

import numpy as np

from tinyad import checkstate as cs
from tinyad import replaystate
from tinyad.backend import ProgramStopped
from tinyad.core import ir
from tinyad.core.errors import TinyadIndexError
from tinyad.runtime import runtime
from tinyad.sequence import CheckFinite, Copy, roll


class CheckedReplay:
    """The checked replay of one watched call (a `Watched`, its recorded `events`)."""

    def __init__(self, watched, events: list, name: str, before=None):
        backend = runtime.backend
        self.watched, self.name = watched, name
        self.storage, self.rng = backend.storage, backend.rng
        self.program = roll(_with_checks(events, watched))
        if before is not None and before.program == self.program:   # (compiled already)
            self.buffers, self.runner = before.buffers, before.runner
        else:
            shapes = {slot: fld for _, fld, slot, _ in watched.copies}
            self.buffers = [_touched(self.storage.to_host(shapes[slot]))
                            for slot in range(len(shapes))]
            # (then the stashes the checks' predicates compare with, tinyad/checkpredicates.py)
            self.buffers += [np.zeros(shape, self.storage.to_host(fld).dtype)
                             for _, fld, shape in watched.stashes]
            self.runner = backend.sequence(self.program, self.buffers)
        # each copy slot's arrays (see `_fresh_buffers`), two to take turns
        self.spare = [[b, _touched(b)] for b in self.buffers[:len(watched.copy_slots)]]
        # (where the program cannot stop part way, nothing need be put back)
        self.stops = bool(watched.finite) or bool(watched.predicates) or \
            any(_may_fail(e, backend) for e in events if e.kind == "launch")
        self.saved = [(fld, _touched(self.storage.to_host(fld)))
                      for fld in (_fields_to_save(events) if self.stops else ())]
        # (a compiled program that launches no kernel drawing random numbers leaves them)
        self.draws = getattr(self.runner, "random_launches", 1) != 0
        self.kernels = {e.traced for e in events if e.kind == "launch"}
        why = f"ran in a checked replay of {name}"
        # (kernel, scalars) of the call's launches -> how a replay forgot them; of those
        # awaiting an adjoint, their number and time in the latest replay (made once: a
        # mass-spring step's launches are thousands, each with its own time step)
        self.forgotten_why = dict.fromkeys(watched.launched, why)
        call = watched.clocks
        self.start = [0, 0]       # the latest replay's first launch number and time
        self.pending_at = {key: _InReplay(self.start, number - call.launch, time - call.tick)
                           for key, (number, time, pending) in watched.launched.items()
                           if pending}
        self.checker = backend.checker
        # (what a replay compares and sets in the checker's state, as tables made once)
        objects = cs.state_objects(self.checker)
        self.consts = replaystate.Consts(watched.consts, objects)
        self.guards = replaystate.Guards(watched.guards, objects)
        self.writes = replaystate.Writes(watched.writes, objects, watched.clocks)
        # The watched call's launches awaiting an adjoint: one a kernel.grad() looked up since
        # (a manual sweep after each call) means a replay would have been wrong to forget them
        self.pending = {id(launch): launch for launch in watched.pending}
        self.sought, self.unwatched = False, False
        watching = _lookups(self.checker)
        if before is not None:
            before._unwatch()
        watching.append(self)
        # What the first replay forgets, worked out now (it costs the plain call little):
        # right while no launch came between
        self.first_forget = _to_forget(self.checker, why)
        self.dead = False      # a launch it ran was differentiated by hand after a replay

    def replay(self) -> bool:
        """Run the call as a replay; -> False where it cannot be (nothing changed then)."""
        checker = self.checker
        if runtime.backend.checker is not checker or not self._may(checker):
            return False
        earlier = self.guards.alike()
        if earlier is None:
            return False
        # (the random numbers are put back too where the program may stop part way)
        rng_state = self.rng.bit_generator.state if self.stops and self.draws else None
        if self.spare:
            self._fresh_buffers()
        for fld, copy in self.saved:
            np.copyto(copy, self.storage.to_host(fld))
        try:
            if not self.runner.run():
                return False           # (still compiling: nothing ran)
        except (ProgramStopped, TinyadIndexError):
            for fld, copy in self.saved:
                self.storage.restore(fld, copy)
            if rng_state is not None:
                self.rng.bit_generator.state = rng_state
            return False
        self._apply(*earlier)
        self._unwatch()
        return True

    def _unwatch(self) -> None:
        if self.unwatched:          # (after the first replay: nothing to do)
            return
        watching = _lookups(self.checker)
        if self in watching:
            watching.remove(self)
        self.pending, self.first_forget = {}, None
        self.unwatched = True

    def _fresh_buffers(self) -> None:
        """For each copy, an array the checker holds no longer: the copies a replay makes go to
        the checker's state (no copy of them), so the next writes into another of the slot's,
        the one the last replay's state let go."""
        for slot, arrays in enumerate(self.spare):
            free = next((a for a in arrays if sys.getrefcount(a) <= 3), None)
            if free is None:
                free = _touched(arrays[0])
                arrays.append(free)
                del arrays[:-3]
            self.buffers[slot] = free

    def _may(self, checker) -> bool:
        """May the checker's state be as the watched call's was? Its constants, what must be
        empty; no kernel.grad() of a launch a replay forgot, nor of one the watched call left
        (the launches it leaves are wanted: the calls run plainly)."""
        if self.dead or (checker.forgotten_noted and
                         not self.kernels.isdisjoint(checker.forgotten_noted)):
            self.dead = True
            return False
        if self.sought:
            return False
        if not self.consts.hold():
            return False
        if checker.lost.sweeps.passed and any(not launch.tape and not launch.adjoint_runs
                                              for launch, *_ in checker.lost.sweeps.passed):
            return False
        # (nor may the checker's copies pass its budget where the call's did not: a note)
        return checker.kept_bytes + self.watched.kept_bytes <= checker.MEMORY_BUDGET

    # ---- the checker as the call leaves it -------------------------------------------------
    def _apply(self, earlier_ticks: dict, earlier_versions: dict) -> None:
        c, watched = self.checker, self.watched
        call = watched.clocks
        now = cs.Clocks(c.tick(), c.next_version(), c.launches, c.tapes)
        copies = {held: self.buffers[slot] for held, slot in watched.copy_slots.items()}
        move = cs.Renumber(call, now, earlier_ticks, earlier_versions, copies)
        _forget_launches(c, f"ran in a checked replay of {self.name}", self.first_forget)
        self.writes.apply(now.tick, now.version, now.launch, move)
        for fld, entries in watched.appended.items():
            log = c.python_writes.get(fld)
            if log is None:
                log = c.python_writes[fld] = deque(maxlen=64)
            log.extend(type(w)(w.site, w.box, w.kind, move.access(w.access)) for w in entries)
        c.replay_forgotten.update(self.forgotten_why)
        self.start[:] = now.launch, now.tick
        c.forgotten.update(self.pending_at)
        c.launches, c.tapes = now.launch + call.launches, now.tape + call.tapes
        c.tick = cs.fresh_counter(now.tick + call.ticks + 1)
        c.next_version = cs.fresh_counter(now.version + call.versions + 1)


def _touched(like: np.ndarray) -> np.ndarray:
    """An array like `like`, its memory written once now: a large array's first writes fault
    in each page, which would cost the replays that use it more than their copies (16 MB: 20
    ms, here)."""
    array = np.empty_like(like)
    array.fill(0)
    return array


def _lookups(checker) -> list:
    """The CheckedReplays told when a kernel.grad() looks up one of their `pending` launch
    records (the checker's find_launch, wrapped once)."""
    wrapped = checker.__dict__.get("find_launch")
    if wrapped is None:
        find = checker.find_launch

        def wrapped(compiled, scalars):
            launch = find(compiled, scalars)
            for replay in wrapped.watching:
                if replay.pending.get(id(launch)) is launch:
                    replay.sought = True
            return launch
        wrapped.watching = []
        checker.find_launch = wrapped
    return wrapped.watching


class _InReplay:
    """(number, time) of a launch the latest replay made, as the checker's `forgotten` holds
    those of launches that left its history (a stand-in for one, a note naming it)."""

    __slots__ = ("number", "start", "time")

    def __init__(self, start: list, number: int, time: int):
        self.start, self.number, self.time = start, number, time

    def __getitem__(self, i: int) -> int:
        return (self.start[0] + self.number, self.start[1] + self.time)[i]

    def __len__(self) -> int:
        return 2

    def __iter__(self):
        return iter((self[0], self[1]))


def _to_forget(c, why: str) -> tuple:
    """What forgetting the checker's launch records adds to its notes of forgotten launches
    (`_forget_launches`), and the launch count it holds for."""
    return (c.launches, dict.fromkeys(c.latest, why),
            {key: (alike[-1].number, alike[-1].time)
             for key, alike in c.undifferentiated.items() if alike})


def _forget_launches(c, why: str, worked_out=None) -> None:
    """Forget the checker's record of each launch, as of launches that left its history: a
    kernel.grad() of one later is said to be unchecked. (A replay made none: the record of
    the launches before it would be what the program's writes left unwatched.) `worked_out`:
    `_to_forget`'s, made before (right if no launch came since). The records go to
    `c.replay_retired`, freed at the next plain call (`free_retired`): after a plain call
    they are thousands of objects, and freeing them would cost the first replay more than its
    program (the copies they hold, a call's worth, are held no longer than the plain calls
    would hold them, until their launches left the history)."""
    if not c.history and not c.latest and not c.undifferentiated and not c.kept:
        return
    if worked_out is None or worked_out[0] != c.launches:
        worked_out = _to_forget(c, why)
    c.replay_forgotten.update(worked_out[1])
    c.forgotten.update(worked_out[2])
    del c.replay_retired[:-1]    # (plain launches between replays: the older ones go now)
    c.replay_retired.append((c.history, c.latest, c.undifferentiated, c.awaiting_adjoint,
                             c.taped, c.custom_forwards, c.reads, c.kept))
    c.history = type(c.history)(maxlen=c.history.maxlen)
    c.latest, c.undifferentiated, c.awaiting_adjoint = {}, {}, {}
    c.taped, c.custom_forwards = [], []
    c.reads, c.buffers, c.kept = type(c.reads)(), type(c.buffers)(), type(c.kept)()
    c.evidence_kept = {}
    c.kept_bytes = 0
    c._no_waiting()
    c.races.verdicts = {}


def free_retired(checker) -> None:
    """Free what replays set aside (`_forget_launches`): at a plain call, where it costs
    little."""
    checker.replay_retired.clear()


def _may_fail(launch, backend) -> bool:
    """May this launch stop the program with a bad index (fast mode: a kernel whose indices
    its IR does not bound reports one through its flag, compile/badindex.py)?"""
    generated = getattr(launch.traced.program(launch.variant, backend), "generated", None)
    return getattr(generated, "bad_slots", 1) != 0


def _with_checks(events: list, watched) -> list:
    """The recorded events with the watched call's looks for NaN and infinity, its copies and
    its checks' predicates where they came."""
    at: dict = {}
    for position, fld, rows in watched.finite:
        at.setdefault(position, []).append(CheckFinite(fld, rows))
    for position, fld, slot, box in watched.copies:
        at.setdefault(position, []).append(Copy(fld, slot, box))
    for position, event in watched.predicates:
        at.setdefault(position, []).append(event)
    out = []
    for position, event in enumerate(events):
        out += at.get(position, ())
        out.append(event)
    out += at.get(len(events), ())
    return out


def _fields_to_save(events: list) -> list:
    """The fields the events write, but for those whose first use is a fill of all of it (what
    the call found there does not matter)."""
    written, first_use, seen = {}, {}, {}
    for event in events:
        if event.kind == "launch":
            key = (event.traced, event.variant)
            if key not in seen:
                body = event.traced.variant_ir(event.variant).body
                seen[key] = (ir.fields_of(body), ir.fields_written(body))
            used, wrote = seen[key]
            for fld in used:
                first_use.setdefault(fld, "launch")
            written.update(dict.fromkeys(wrote))
        elif event.kind in ("fill", "set"):
            first_use.setdefault(event.field, event.kind)
            written[event.field] = None
    return [fld for fld in written if first_use.get(fld) != "fill"]
