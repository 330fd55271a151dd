"""The access log of interp mode, and the rule checks it makes possible.

Every global read, store and atomic of a checked launch passes through `LoggedMemory`, which
knows the field, the element, the launch, the parallel-loop iteration, the source line and the
value. From that it checks, element by element:

* within a Tape (or within one launch that is later differentiated by hand), that no element is
  changed after a read whose value the adjoint kernel replays (Global Data Access Rules 1 and 2,
  reads during accumulation). Which reads matter is exact: the loads that survive in the kernel's
  adjoint IR;
* that no two iterations of a parallel loop touch one element in conflicting ways (an error
  where a gradient can depend on it, else a warning: tinyad/check/races.py decides);
* before an adjoint kernel runs, that each element it replays holds the value the forward
  read (`Checker.check_replay`): the witness that covers every cause, Python-scope writes
  included.
The log finds the access that breaks a rule; which rule it breaks and what the report names
are decided by the judge of fast mode's trails (tinyad/check/trail.py `conflict`,
`changed_after_read`), asked at that access, so a loop that breaks a rule in a Tape stops there.
The misuse checks around launches (unseeded outputs, adjoint order, missing gradients on the
path) and their memory (`LaunchChecker`) are shared with fast mode: tinyad/check/launches.py.
What the log remembers is one event per element (interp/elementlog.py: a scope's first reads
and writes, each element's latest write) and, per launch, the values of only the elements its
adjoint replays (a `Witness`), so its memory grows with the fields, not with the accesses. A
parallel loop run as lanes makes the same checks over index arrays: interp/lanelog.py.
"""
from __future__ import annotations

import numpy as np

from tinyad.check import changes, trail
from tinyad.check.launches import Launch, LaunchChecker
from tinyad.check.nonfinite import NonFiniteChecks
from tinyad.check.report import ACCUMULATE, SLOTS, Access
from tinyad.check.trail import same_value
from tinyad.core.srcloc import user_loc
from tinyad.interp.elementlog import ElementLog, Witness
from tinyad.interp.memory import Memory


def as_access(event):
    """The log keeps writes as plain tuples (kind, site, launch, iteration, value, time), which
    are cheap; a report gets them as Access objects."""
    if event is None or isinstance(event, Access):
        return event
    kind, site, launch, iteration, value, time = event
    return Access(kind, site.loc, launch.kernel, launch.number, iteration, value, time)


class Scope:
    """What has been read and written since a Tape began (or during one launch): one event per
    element (interp/elementlog.py), so its size is the fields', not the number of accesses."""

    def __init__(self, deferred: bool):
        self.deferred = deferred          # record violations instead of raising them now
        # a deferred scope (one launch's) is emptied and reused for the next launch
        self.reads = ElementLog(deferred)        # first read whose value the adjoint replays
        # (reported by line, launch and iteration: no values kept)
        self.first_write = ElementLog(deferred, values=False)
        self.accumulated = ElementLog(deferred, values=False)  # first += / -=

    def writes_before(self, fld, index, read: Access) -> tuple:
        """The element's writes before `read` that a report may name (its first of all and its
        first +=, where they came before it), as tinyad/check/trail.py `changed_after_read`
        takes them: their kinds, and one by position."""
        earlier = [e for e in (self.first_write.get(fld, index), self.accumulated.get(fld, index))
                   if e is not None and e.time < read.time]
        return [e.kind for e in earlier], earlier.__getitem__

    def empty(self) -> "Scope":
        for log in (self.reads, self.first_write, self.accumulated):
            log.empty()
        return self


DEFERRED_KEPT = 16     # violations a launch outside a Tape keeps for its adjoint


class Checker(NonFiniteChecks, LaunchChecker):
    """The launch checks' memory plus interp mode's per-element log (one per ti.init)."""

    def __init__(self, mode: str):
        super().__init__(mode)
        # a gradient's point (its primal's values) is copied only when the primal is next
        # written: the backend says so before each launch that may write it
        self.copies_before_writes = True
        # each element's latest write, for attribution (its value: the element's now)
        self.last_write = ElementLog(values=False)
        self.bulk_write: dict = {}       # field -> last whole-field Python write Access
        # (field, element) -> the time of the write a report blamed for changing it after a
        # replayed read: an adjoint replaying an earlier read of it is not reported again (one
        # bug, one violation: the reads of later launches too, as fast mode counts them)
        self.reported_changes: dict = {}
        self._launch_scope: Scope | None = None   # reused by launches outside a Tape
        # (field, id of a load) -> the arrays its lanes read in the latest launch, which the next
        # launch's witness shares where it reads the same (interp/lanelog.py _witness)
        self.read_parts: dict = {}

    def new_launch(self, compiled, scalars, facts=None) -> Launch:
        launch = super().new_launch(compiled, scalars, facts)
        launch.read_rows, launch.wrote_rows = {}, {}    # (the log adds the rows it sees)
        return launch

    def launch_scope(self) -> Scope:
        """The scope of one launch outside a Tape: emptied, not allocated again per launch."""
        if self._launch_scope is None:
            self._launch_scope = Scope(deferred=True)
        return self._launch_scope.empty()

    def begin_tape(self, loc=None):
        super().begin_tape(loc)
        self._launch_scope = None     # the Tape's scope takes its place: keep one in memory

    def tape_scope(self):
        return Scope(deferred=False)

    def custom_grad_write(self, fld, index, kind, site, old, new):
        """Inside a grad_for function: a plain store must not discard an earlier gradient
        (the judge decides, check/changes.py)."""
        if kind == "store" and not self.gradient_consumed(fld):
            error = changes.gradient_assigned(fld.name, old, new, Access(
                kind, site.loc, None, None, None, None, self.tick()), index)
            if error is not None:
                self.report(error)

    def last_writer(self, fld, index) -> Access | None:
        element, bulk = self.last_write.get(fld, index), self.bulk_write.get(fld)
        if element is not None:     # (no values kept: it wrote what the element holds now)
            element.value = fld.host_array[index][()]
        if element is None or (bulk is not None and bulk.time > element.time):
            return bulk
        return element

    def first_read(self, fld, index, read: Access) -> Access:
        """`read`, a scope's first read of fld[index] (of the first launch that read it, the
        first in time), as the first of that launch in a serial run of it: lanes run a loop's
        statements one after the other over all iterations (x[i + 1], then x[i - 1]: the
        first in time is not the least iteration's). Its launch's witness knows, once it has
        ended."""
        launch = self._launch_numbered(read.launch)
        witness = launch.reads if launch is not None else None
        first = witness.first(fld, index) if isinstance(witness, Witness) else None
        return read if first is None else first

    def _launch_numbered(self, number) -> Launch | None:
        for launches in (self.taped, self.history):
            for launch in reversed(launches):
                if launch.number == number:
                    return launch
                if launch.number < number:
                    break
        return None

    def _changed_reads(self, launch, fields=None) -> list:
        """The elements `launch`'s replayed loads read (of `fields`; None: all) that hold
        another value now, each with its first read, in a serial run's order (as fast mode
        names them): [(field, element, read)]."""
        witness = launch.reads if launch is not None else None
        if not isinstance(witness, Witness):
            return []
        wanted = None if fields is None else {id(f) for f in fields}
        found = [(fld, element, read) for fld in witness.changed_fields()
                 if wanted is None or id(fld) in wanted
                 for element, read in witness.changed(fld, fld.host_array).items()]
        found.sort(key=lambda f: witness.order(f[2]))
        return found

    def changed_read(self, launch, fields):
        found = self._changed_reads(launch, fields)
        if not found:
            return None
        fld, element, read = found[0]
        return (fld, element, read, fld.host_array[element].tolist(),
                self.last_writer(fld, element))

    def check_replay(self, launch: Launch | None, kernel_name: str) -> None:
        """Before an adjoint runs: each element its forward's replayed loads read (the
        launch's witness) must still hold what they read; one reported already at the write
        that changed it is not reported again. The first in a serial run's order, and in
        warn mode each other one; the judge decides (check/changes.py)."""
        for fld, element, read in self._changed_reads(launch):
            if read.time < self.reported_changes.get((fld, element), -1):
                continue
            error = changes.replay_divergence(kernel_name, fld.name, element, read,
                                              fld.host_array[element][()],
                                              self.last_writer(fld, element))
            if error is not None:
                self.report(error)

    # ---- Python scope -----------------------------------------------------------------------
    def gradients_set(self, fields, loc, grads=None) -> int:
        time = super().gradients_set(fields, loc, grads)
        for fld in fields:         # (as python_write: each a whole-field write)
            self.bulk_write[fld] = Access("python write", loc or user_loc(), None, None, None,
                                          None, time)
        return time

    def python_write(self, fld, index, loc=None) -> Access:
        """A Python-scope write to one element (index) or to the whole field (index None)."""
        access = super().python_write(fld, index, loc)
        if index is None:
            self.bulk_write[fld] = access
        else:
            self.last_write.put(fld, index, "python write", access.loc, None, None, None, 0,
                                access.time)
        if self.tape is None or fld.role != "primal":
            return access
        cols = self.tape.reads.columns(fld, create=False)
        if cols is None:
            return access
        changed = (cols.event != 0) & changes.changed(cols.value, fld.host_array)
        elements = [tuple(int(i) for i in where) for where in zip(*np.nonzero(changed))]
        for element in elements if index is None else [e for e in elements if e == index]:
            read = self.first_read(fld, element, self.tape.reads.get(fld, element))
            error = changes.python_overwrite(fld.name, element, read, access,
                                             fld.host_array[element])
            if error is not None:
                self.reported_changes[(fld, element)] = access.time
                self.report(error)
        return access


class LoggedMemory(Memory):
    """Memory of a forward launch with the access log on."""

    def __init__(self, checker: Checker, launch: Launch, replayed_loads: frozenset,
                 gradient_resets: frozenset = frozenset()):
        self.checker = checker
        self.gradient_resets = gradient_resets   # grad stores that clear with their primal
        self.launch = launch
        self.replayed = replayed_loads
        # A Tape keeps what its adjoints replay, except inside a grad_replaced function, whose
        # grad_for recomputes what it needs (the launch's own witness still checks that).
        in_tape = checker.tape is not None and not checker.in_custom_primal
        self.scope = checker.tape if in_tape else checker.launch_scope()
        self.iteration = None
        self.loop = None
        self.elements: dict = {}       # element -> what this loop's iterations did to it
        # this launch's replayed reads (launch.reads at the end)
        self.witness = Witness(launch.kernel, launch.number)
        self.lane_rows = None          # the rows lanes touched, kept as flat indices (lanelog)
        self._kernel, self._number, self._tick = launch.kernel, launch.number, checker.tick

    def finish(self):
        """The launch has ended: keep the values its replayed loads read, compactly."""
        self.launch.reads = self.witness.finish()
        if self.lane_rows is not None:
            self.launch.row_source = self.lane_rows.compact(self.launch.reads)

    def begin_iteration(self, loop, index):
        if loop is not self.loop:
            self.loop, self.elements = loop, {}
            self.witness.segment_at(self._tick())    # a parallel loop's run begins
        self.iteration = index
        if index is None:
            self.loop, self.elements = None, {}
            self.witness.segment_at(self._tick())    # and ends

    def _access(self, kind, site, value) -> Access:
        return Access(kind, site.loc, self._kernel, self._number, self.iteration, value,
                      self._tick())

    def _raise(self, make_error):
        """Report the violation `make_error()` builds: now (in a Tape), or, outside one, when
        the launch is differentiated. A launch keeps its first few: a loop that breaks a rule
        at every iteration would otherwise keep one report per iteration (a runaway `while`
        grew by 45 MB a second), and the adjoint raises the first."""
        if not self.scope.deferred:
            self.checker.report(make_error())
        elif len(self.launch.problems) < DEFERRED_KEPT:
            self.launch.add_problem(make_error())

    def _race(self, fld, make_error):
        """A conflict between two iterations: an error only where a gradient can depend on it
        (check/races.py decides; elsewhere it was shown as a warning)."""
        if self.checker.races.decide(self.launch, fld.name, make_error, not self.scope.deferred):
            self._raise(make_error)

    # ---- the three kinds of access -------------------------------------------------------
    def load(self, fld, index, site):
        # The hottest path of interp mode with checks on: kept inline on purpose.
        if index and min(index) < 0:
            self.check(fld, index, site)
        try:
            value = fld.host_array[index]
        except IndexError:
            return Memory.load(self, fld, index, site)   # raises the bounds error
        if fld.role != "primal":
            return value
        rows = self.launch.read_rows.get(fld)
        if rows is None:
            rows = self.launch.read_rows[fld] = set()
        rows.add(index[:1])
        key = (fld, index)
        it = self.iteration
        if it is not None:
            seen = self.elements.get(key)
            if seen is None:       # (the layout of _cross_iteration's, with a read's event)
                self.elements[key] = [it, ("read", site, self.launch, it, value,
                                           self._tick()),
                                      *[None] * (N_SLOTS - 1), 1 << SLOTS["read"]]
            elif seen[0] != it and seen[-1] != 1 << SLOTS["read"]:   # (reads never conflict)
                self._cross_iteration(key, SLOTS["read"], "read", site, value)
        if id(site) in self.replayed:   # the adjoint replays this read: remember the value
            event = ("read", site.loc, self._kernel, self._number, it, value, self._tick())
            self.witness.add_one(fld, index, event)
            self.scope.reads.put_first(fld, index, *event)
        return value

    def store(self, fld, index, value, site):
        old = Memory.load(self, fld, index, site)
        fld.host_array[index] = value
        self._written(fld, index, "store", site, old)

    def atomic(self, op, fld, index, value, site):
        old = Memory.atomic(self, op, fld, index, value, site)
        self._written(fld, index, "atomic_" + op, site, old)
        return old

    def _written(self, fld, index, kind, site, old):
        new = fld.host_array[index]
        if fld.role != "primal":
            if fld.role == "grad" and self.checker.in_custom_grad and \
                    id(site) not in self.gradient_resets:
                self.checker.custom_grad_write(fld, index, kind, site, old, new)
            return
        self.launch.wrote_rows.setdefault(fld, set()).add(index[:1])
        key = (fld, index)
        event = (kind, site.loc, self._kernel, self._number, self.iteration, new, self._tick())
        if self.iteration is not None:
            self._cross_iteration(key, SLOTS[kind], kind, site, new)
        scope = self.scope
        read = scope.reads.get(fld, index) if scope.reads.has(fld, index) else None
        if read is not None and not same_value(new, read.value):
            # one report per change: not again at the replay
            self.checker.reported_changes[(fld, index)] = event[-1]
            scope.reads.clear(fld, index)
            if read.launch != self._number:     # (an ended launch: its witness is whole)
                read = self.checker.first_read(fld, index, read)
            self._raise(lambda: trail.changed_after_read(
                fld.name, index, read, Access(*event), *scope.writes_before(fld, index, read)))
        scope.first_write.put_first(fld, index, *event)
        if kind in ACCUMULATE:
            scope.accumulated.put_first(fld, index, *event)
        self.checker.last_write.put(fld, index, *event)

    def _cross_iteration(self, key, slot, kind, site, value):
        """Two iterations conflict on an element unless both only read it, or both apply the
        same commutative atomic (+= / -=, min, max) to it, or store the same value. Which two
        accesses the report names, tinyad/check/trail.py decides (as for fast mode's records),
        from the element's first access of each kind and this one, in order; an element is
        reported once a loop."""
        it = self.iteration
        seen = self.elements.get(key)
        # [the one iteration that touched it so far (or SHARED), the first event per kind
        # (kind, site, launch, iteration, value, tick), kinds bitmask]
        if seen is None:
            seen = self.elements[key] = [it, *[None] * N_SLOTS, 0]
        elif seen[0] != it:
            if seen[-1] == 1 << slot and slot != SLOTS["store"]:
                return   # only this same read or commutative atomic so far: no conflict
            if seen[0] is not REPORTED and any(
                    earlier is not None and earlier[3] != it and not (
                        slot == other == SLOTS["store"] and same_value(earlier[4], value))
                    for other in CONFLICTS[slot] for earlier in (seen[other + 1],)):
                self._conflict(key, seen, (kind, site, self.launch, it, value, self._tick()))
                seen[0] = REPORTED
            elif seen[0] is not REPORTED:
                seen[0] = SHARED
        if seen[slot + 1] is None:
            seen[slot + 1] = (kind, site, self.launch, it, value, self._tick())
            seen[-1] |= 1 << slot

    def _conflict(self, key, seen, now) -> None:
        events = sorted((e for e in seen[1:-1] if e is not None), key=lambda e: e[5]) + [now]
        self._race(key[0], lambda: trail.conflict(
            self.launch.kernel, key[0].name, key[1], [e[0] != "read" for e in events],
            [e[3] for e in events], lambda k: as_access(events[k])))


SHARED = object()   # an element touched by several iterations of the loop
REPORTED = object()   # ... which conflict on it, reported


# Which slots (check/report.py SLOTS) conflict with each: every other one, and a store also
# with a store
N_SLOTS = max(SLOTS.values()) + 1
CONFLICTS = {slot: tuple(other for other in range(N_SLOTS)
                         if other != slot or slot == SLOTS["store"]) for slot in range(N_SLOTS)}
