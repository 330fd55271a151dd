"""What the launch-level rule checks remember across launches, shared by every backend that
checks (interp and fast mode): `LaunchChecker`, its record of each forward launch (`Launch`),
and the bugs warn mode counts (`Problem`). The checks themselves need only facts about each
kernel, taken from its IR (tinyad/check/facts.py), and fields' values, never a per-element log:
before a forward or tangent launch in tinyad/check/forward.py, around an adjoint launch in
tinyad/check/adjoints.py. The checker extends `LaunchChecker` with the per-element witness
(tinyad/check/replaycheck.py).
"""
from __future__ import annotations

import contextlib
import itertools
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from tinyad.check import beforetape, rules
from tinyad.check.facts import kernel_facts
from tinyad.check.lostgrads import CopyFacts, LostGradients
from tinyad.check.races import RaceWatch
from tinyad.check.render import print_report
from tinyad.check.report import Access, Report, bug_of, element_name
from tinyad.check.spans import RowSpans  # noqa: F401  (its users import it from here)
from tinyad.core.srcloc import user_loc
from tinyad.notices import note

_new = object.__new__


@dataclass
class Launch:
    """One forward launch of a kernel, as far as its adjoint needs to know. new_launch makes
    one per checked launch without the generated __init__ (a frame setting every field, a
    sixth of a small launch's checks): it sets the first four and `tape`, and the defaults
    are the class's (a dataclass without slots keeps them there; Python 3.11 keeps an
    instance's own attributes inline, no dict each: see below). Its kernel's name (`kernel`)
    is read only for reports: looked up then."""
    number: int
    compiled: object
    scalars: tuple
    time: int
    # (Empty tuples until set: a launch's own containers would be thousands of objects a Tape
    # for Python's cyclic collector to go through again and again, 70 ms a full collection.)
    snapshots: list | tuple = ()   # its replayed reads, filed (check/readwitness.py)
    # (its LaunchPlan, the Tape number its reads belong to, in a grad_replaced function?)
    # while no write has come near what it read, which is not filed then
    # (tinyad/check/replaycheck.py)
    waiting: tuple | None = None
    writes: list | tuple = ()      # the regions this launch may write
    problems: list | tuple = ()    # violations to raise if it is differentiated (add_problem)
    adjoint_runs: int = 0
    adjoint_at: int = 0    # when its adjoint last ran (the checker's tick)
    # Once its Tape's backward has run, or no .grad() can find it again: (the write
    # version then, the fields its adjoint replays), as what it read is no longer watched
    # (replaycheck.py)
    released: tuple | None = None
    tape: int = 0          # the number of the Tape that recorded it (0: none)
    # The leading index of every element read / written, per field: enough to tell the
    # time steps of a time-indexed field apart (the order check), and small. None until the
    # order check asks (most launches are never asked: two dicts a launch are a tenth of a
    # launch's checks), from `row_source`: (loads, writes, f) where f(loads, writes) ->
    # (read_rows, wrote_rows).
    read_rows: dict | None = None
    wrote_rows: dict | None = None
    row_source: tuple | None = None
    # A recompute (DiffTaichi's checkpointing: the same launch again in the backward phase)
    # stands for the earlier launch it repeats: one adjoint undoes both.
    repeats: Launch | None = None

    @property
    def kernel(self) -> str:
        return self.compiled.ir.name

    def add_problem(self, error) -> None:
        if not self.problems:
            self.problems = []
        self.problems.append(error)

    @property
    def origin(self) -> Launch:
        launch = self
        while launch.repeats is not None:
            launch = launch.repeats
        return launch


# One record made through __init__ as the module loads, every field set in order: Python 3.11
# keeps an instance's attributes inline only under names its class's shared keys took while
# few instances existed. A name first set after (adjoint_runs, once a backward pass ran) would
# give every later record a dict of its own, one more object for the cyclic collector per launch.
Launch(0, None, (), 0)


@dataclass
class Problem:
    """One bug as warn mode shows and counts it: the first report of a rule at a pair of source
    lines, and every element it was seen on (the next iterations, the next launches)."""
    report: Report
    elements: set = field(default_factory=set)


# The launches remembered for a manual kernel.grad() to find its forward launch by (a Tape keeps
# its own launches until its backward ran). A bound, so that a long run never differentiated
# does not grow without end (the launches hold copies only under the witness's memory budget,
# tinyad/check/replaycheck.py); an adjoint whose launch left it says it is unchecked. mpm's
# manual sweep (4 launches a step) fits 1024 steps.
HISTORY = 4096
FORGOTTEN_KEPT = 1 << 16


class LaunchChecker:
    """What the launch checks remember across launches (one per ti.init); a backend's checker
    subclasses it."""

    def __init__(self, mode: str, history: int | None = None):
        self.mode = mode               # ti.init's check: "error" raises, "warn" shows and goes on
        self.tick = itertools.count(1).__next__   # a global order of events
        self.launches = 0
        self.tapes = 0                 # Tapes begun so far (the latest one's number)
        self.history: deque = deque(maxlen=history or HISTORY)
        # field with a gradient -> {launch number: launch} of the launches in the history not
        # yet differentiated that load it, in launch order: what the order check of a manual
        # sweep looks at (tinyad/check/adjoints.py), without walking the whole history. A
        # Tape's launches are not filed there (its backward would take each out again): the
        # latest Tape's launches are `taped`, in order.
        self.awaiting_adjoint: dict = {}
        self.taped: list = []
        self.latest: dict = {}         # (kernel, scalars) -> its latest launch in history
        # (kernel, scalars) -> its launches in the history outside a Tape not yet
        # differentiated, oldest first: the launch a recompute repeats is the latest of them
        # (a kernel launched alike at every step, such as mpm's grid_op, has many)
        self.undifferentiated: dict = {}
        # (kernel, scalars) of launches that left the history not yet differentiated (the
        # oldest forgotten first past FORGOTTEN_KEPT), and the kernels told about it
        self.forgotten: dict = {}
        self.forgotten_noted: set = set()
        # (kernel, scalars) of launches a checked replay of a captured function made or forgot
        # (tinyad/checkedreplay.py) -> how; the records it set aside, freed at the next call
        self.replay_forgotten: dict = {}
        self.replay_retired: list = []
        self.tape = None               # while a Tape records: the backend's scope of it
        self.differentiating = None    # that scope, while the Tape's backward pass runs
        self.backward_loc = None       # while a Tape's backward runs: the user's line of it
        self.taint: dict = {}          # in a Tape: gradless field with derived data: (loc, kernel)
        self.python_reads: dict = {}   # in a Tape: value -> (field, index, loc) read in Python
        self.in_custom_grad = 0
        self.in_custom_primal = 0      # in a grad_replaced function that a Tape records
        # Per grad_replaced call the Tape recorded, its forward launches (a stack: the Tape
        # runs the grad_for functions in reverse), and while one grad_for runs, (its name,
        # the launches of its forward): its kernels must read what those read.
        self.custom_forwards: list = []
        self.custom_recording: list | None = None
        self.custom_running: tuple | None = None
        self.problems: dict = {}       # warn mode: report signature -> Problem
        self.grad_accumulated_at: dict = {}   # grad field -> time an adjoint last added to it
        self.grad_cleared_at: dict = {}       # grad field -> time Python scope last wrote it
        self.grad_warned_at: dict = {}        # grad field -> time a sum over rounds was noted
        self.hand_gradient_at: dict = {}      # grad field -> time a kernel last wrote it by hand
        self.grad_read_at: dict = {}          # grad field -> time a kernel (or adjoint) read it
        self.last_adjoint_at = 0              # time the latest adjoint launch ran
        # A gradient mixed across parameter values: each primal field's latest change, and
        # for each gradient, its primal's values (and when) when an adjoint last added to it.
        self.primal_changed: dict = {}        # primal field -> Access of its latest write
        self.grad_point: dict = {}            # grad field -> (primal values, Access, time)
        # The launch sequence calls before_write ahead of every write of a primal field, so
        # those values are copied only when the primal is next written (None until then: a
        # sweep per Tape would otherwise copy every field it differentiates, time-indexed ones
        # too; tinyad/check/pointcopies.py).
        self.uncopied_points: dict = {}       # primal field -> [grad fields awaiting a copy]
        # Computed before the Tape (tinyad/check/beforetape.py says what each holds): fields
        # derived before the Tape (field -> (kernel, store loc, source field, spans derived)),
        # those the current Tape's launches derive, the rows they wrote, the fields warned of
        self.derived_outside_tape: dict = {}
        self.derived_in_tape: dict = {}
        self.written_in_tape: dict = {}
        self.warned_in_tape: set = set()
        # kernel -> (the taint's fields it was last checked against, the (field, entry) pairs
        # the check added): a Tape's taint starts empty, so most Tapes see the same (before_forward)
        self.paths_checked: dict = {}
        self.lost = LostGradients(self)       # gradients lost around a Tape (lostgrads.py)
        self.races = RaceWatch()      # parallel conflicts, and where their values went

    def report(self, error) -> None:
        """A violation: raised (check="error") or shown and passed over (check="warn"). In warn
        mode a violation at the same lines as an earlier one (the next iteration, the next
        launch) is counted with that problem but not shown again."""
        if self.mode != "warn":
            raise error
        r = error.report
        problem = self.problems.get(bug_of(r))
        if problem is None:
            problem = self.problems[bug_of(r)] = Problem(r)
            print_report(r)
        problem.elements.add(r.element_text)
        problem.elements.update(element_name(r.field, e) for e in error.more_elements)

    def new_launch(self, compiled, scalars, facts=None) -> Launch:
        """The record of a forward launch of `compiled` (its facts: `facts`, None: looked up)."""
        launch = _new(Launch)          # (see Launch: its other fields are the class's defaults)
        launch.number = self.launches = self.launches + 1
        launch.compiled = compiled
        launch.scalars = scalars
        launch.time = self.tick()
        key = (compiled, scalars)      # (hashable: the dicts below take it as a key)
        taped = self.tape is not None
        if taped:       # (a Tape's launch repeats none: the Tape differentiates it)
            launch.tape = self.tapes
        if self.races.tainted:      # (before the launch is filed: this may raise)
            self.races.follow(self, launch)
        if not taped:
            alike = self.undifferentiated.get(key)
            if alike is None:
                alike = self.undifferentiated[key] = deque()
            # the latest alike if not yet differentiated (a grad_for's recompute repeats its
            # Tape's launch, which no adjoint differentiates), else the latest outside a Tape
            # not yet differentiated
            earlier = self.latest.get(key)       # (_latest_alike, for a hashable key)
            if earlier is None or earlier.adjoint_runs:
                earlier = alike[-1] if alike else None
                if earlier is None and self.forgotten:
                    earlier = self._forgotten_alike(compiled, scalars)
            if earlier is not None and earlier.time < self.last_adjoint_at:
                launch.repeats = earlier           # launched again, mid-backward
                if self.forgotten:      # (mostly empty)
                    self.forgotten.pop(key, None)
            alike.append(launch)
        history = self.history
        if len(history) == history.maxlen:
            self._forget(history[0])
        if self.custom_recording is not None:
            self.custom_recording.append(launch)
        history.append(launch)
        if taped:
            self.taped.append(launch)
        else:
            by_field = self.awaiting_adjoint
            for fld in (kernel_facts(compiled) if facts is None else facts).loads_differentiable:
                awaiting = by_field.get(fld)
                if awaiting is None:
                    awaiting = by_field[fld] = {}
                awaiting[launch.number] = launch
        latest = self.latest
        superseded = latest.get(key)
        latest[key] = launch
        if superseded is not None and superseded.adjoint_runs and not superseded.tape:
            self.superseded(superseded)
        return launch

    def superseded(self, launch: Launch) -> None:
        """`launch`, differentiated by hand, is no longer the latest launch alike, so no
        .grad() finds it again (find_launch takes the latest undifferentiated launch alike,
        else the latest): what a backend's checker kept for its replay may go. (A Tape's
        launches are its own to let go.)"""

    def _forget(self, oldest: Launch) -> None:
        """`oldest` leaves the history: a manual adjoint can no longer find it."""
        key = (oldest.compiled, oldest.scalars)
        # (a kernel never differentiated, launched again at every step of each backward pass,
        # would chain every launch it ever made: the chain ends in the history)
        oldest.repeats = None
        if not oldest.adjoint_runs and not oldest.tape:   # (else not awaiting there)
            self._no_longer_awaiting(oldest)
            alike = self.undifferentiated[key]
            alike.popleft()                    # (the oldest of them)
            if not alike:
                del self.undifferentiated[key]
        if self.latest.get(key) is not oldest:
            return
        del self.latest[key]
        if not oldest.adjoint_runs and not oldest.tape:
            if len(self.forgotten) >= FORGOTTEN_KEPT:
                del self.forgotten[next(iter(self.forgotten))]
            self.forgotten[key] = (oldest.number, oldest.time)

    def _forgotten_alike(self, compiled, scalars) -> Launch | None:
        """A stand-in for the launch alike this one that left the history not yet
        differentiated: a recompute in a long manual sweep repeats it (its round is the
        forward's, not this launch's), though its values are no longer known."""
        found = self._forgotten(compiled, scalars)
        return None if found is None else Launch(found[0], compiled, scalars, found[1])

    def _forgotten(self, compiled, scalars) -> tuple | None:
        """(number, time) of the launch alike that left the history undifferentiated, or None."""
        try:
            return self.forgotten.get((compiled, scalars))
        except TypeError:    # an unhashable argument
            return None

    def _no_longer_awaiting(self, launch: Launch) -> None:
        for fld in kernel_facts(launch.compiled).loads_differentiable:
            self.awaiting_adjoint[fld].pop(launch.number, None)

    def awaiting_after(self, fld, time: int) -> list:
        """The launches after `time` that load `fld` and await their adjoint, latest first."""
        found = []
        for later in reversed(self.awaiting_adjoint.get(fld, {}).values()):
            if later.time <= time:
                break
            found.append(later)
        for later in reversed(self.taped):
            if later.time <= time:
                break
            if not later.adjoint_runs and fld in kernel_facts(later.compiled).loads_differentiable:
                found.append(later)
        return found

    def gradient_consumed(self, grad) -> bool:
        """Has `grad` been used since an adjoint or a kernel last added to it: read by the
        adjoint of its primal's producer, or by a gradient kernel written by hand (one that
        adds to another gradient; a kernel that only reads it uses nothing)? Then a grad_for
        function that clears it discards nothing still owed: PlasticineLab clears its SVD's
        gradients each step, after its svd_grad kernel used them."""
        added = max(self.grad_accumulated_at.get(grad, 0), self.hand_gradient_at.get(grad, 0))
        return 0 < added < self.grad_read_at.get(grad, 0)

    def pinned(self, launch: Launch) -> bool:
        """Is `launch` in the latest Tape and not yet differentiated? Its Tape will replay it."""
        return launch.tape == self.tapes and launch.tape and not launch.adjoint_runs

    def adjoint_ran(self, launch: Launch | None):
        """`launch`'s adjoint has run, for it and the launches it stands for (a recompute's
        forward, which is not the latest alike: no .grad() finds it again)."""
        at = self.last_adjoint_at = self.tick()
        while launch is not None:
            if launch.tape:         # (a Tape's launch: its Tape lets it go, tape_differentiated)
                launch.adjoint_runs += 1
                launch.adjoint_at = at
            else:
                if not launch.adjoint_runs:
                    self._no_longer_awaiting(launch)
                    self._differentiated(launch)
                launch.adjoint_runs += 1
                launch.adjoint_at = at
                if self._latest_alike(launch.compiled, launch.scalars) is not launch:
                    self.superseded(launch)
            launch = launch.repeats

    def _differentiated(self, launch: Launch) -> None:
        """`launch`, outside a Tape, no longer awaits its adjoint: out of its kernel's stack."""
        alike = self.undifferentiated.get((launch.compiled, launch.scalars))
        if not alike:
            return            # (a stand-in for a launch that left the history)
        if alike[-1] is launch:
            alike.pop()       # (the usual sweep: the latest first)
        else:
            try:
                alike.remove(launch)
            except ValueError:
                return
        if not alike:
            del self.undifferentiated[(launch.compiled, launch.scalars)]

    def tape_scope(self):
        """What a backend remembers about one Tape (its subclass says)."""
        return True

    @contextlib.contextmanager
    def custom_primal(self):
        """Around a grad_replaced function a Tape records: the adjoints of its kernels never
        run (its grad_for does instead); its launches are kept for the grad_for's check."""
        outer, self.custom_recording = self.custom_recording, []
        self.in_custom_primal += 1
        try:
            yield
        finally:
            self.in_custom_primal -= 1
            self.custom_forwards.append(self.custom_recording)
            self.custom_recording = outer

    @contextlib.contextmanager
    def custom_gradient(self, name: str):
        """Around a grad_for function the Tape runs, for the latest grad_replaced call left."""
        forwards = self.custom_forwards.pop() if self.custom_forwards else []
        outer, self.custom_running = self.custom_running, (name, forwards)
        self.in_custom_grad += 1
        try:
            yield
        finally:
            self.in_custom_grad -= 1
            self.custom_running = outer

    def check_custom_reads(self, fields, kernel: str) -> None:
        """A kernel of the running grad_for function reads `fields`: what its forward's kernels
        read of them must be there still."""
        name, forwards = self.custom_running
        for launch in forwards:
            found = self.changed_read(launch, fields)
            if found is not None:
                fld, element, read, now, writer = found
                self.report(rules.custom_gradient_reads_changed(
                    gradient=name, kernel=kernel, field=fld.name, element=element, read=read,
                    now=now, last_writer=writer))
                return

    def changed_read(self, launch: Launch, fields):
        """The first element of `fields` that `launch` read and that has changed since, as
        (field, element, the read, its value now, the last writer), or None (the backend
        says: it keeps what launches read)."""
        return

    def begin_tape(self, loc=None):
        self.tapes += 1
        self.taped = []
        self.custom_forwards = []
        self.tape, self.taint, self.python_reads = self.tape_scope(), {}, {}
        self.written_in_tape, self.warned_in_tape = {}, set()
        self.derived_in_tape = {}
        # (LostGradients.tape_begins, in line: a Tape of a small kernel pays mostly such calls)
        lost = self.lost
        if lost.sweeps.reads:
            lost.sweeps.used_all()
        lost.unwritten_loss, lost.tape_loc, lost.backward_at = None, loc, 0
        if lost.cut or lost.cleared or lost.held_gradient:   # (empty, mostly: kept then)
            lost.cut, lost.cleared, lost.held_gradient = {}, {}, set()

    def end_tape(self, loc=None):
        """The Tape stops recording; its adjoints run next, from the user's line `loc`."""
        self.differentiating = self.tape
        self.tape, self.taint, self.python_reads = None, {}, {}
        self.backward_loc = loc
        beforetape.tape_ends(self)

    def tape_differentiated(self):
        """The latest Tape's backward pass has run (what LostGradients notes, in line)."""
        self.differentiating = None
        lost = self.lost
        lost.backward_at, lost.backward_loc = self.tick(), self.backward_loc
        if lost.cleared or lost.held_gradient:
            lost.cleared, lost.held_gradient = {}, set()
        self.backward_loc = None

    def find_launch(self, compiled, scalars) -> Launch | None:
        """The forward launch a manual kernel.grad(*args) belongs to: the latest alike not yet
        differentiated (a kernel launched twice alike is swept twice, the later launch
        first), else the latest alike."""
        latest = self._latest_alike(compiled, scalars)
        if latest is None:
            self._note_forgotten(compiled, scalars)
            return None
        if not latest.adjoint_runs:
            return latest
        for launch in reversed(self.history):
            if (launch.compiled is compiled and not launch.adjoint_runs
                    and launch.scalars == scalars):
                return launch
        return latest

    def _note_forgotten(self, compiled, scalars) -> None:
        """A manual adjoint whose forward launch left the history runs unchecked: say so."""
        try:
            replayed = self.replay_forgotten.get((compiled, scalars))
        except TypeError:    # an unhashable argument
            replayed = None
        if replayed is not None and compiled not in self.forgotten_noted:
            self.forgotten_noted.add(compiled)
            note(f"check: {compiled.ir.name}.grad({', '.join(map(repr, scalars))}) belongs to "
                 f"a launch that {replayed}, which keeps no record of each launch, so this "
                 "adjoint's replay is not checked (the captured function runs launch by launch "
                 "from its next call on)")
            return
        found = self._forgotten(compiled, scalars)
        if found is None or compiled in self.forgotten_noted:
            return
        number = found[0]
        self.forgotten_noted.add(compiled)
        name = compiled.ir.name
        args = ", ".join(map(repr, scalars))
        note(f"check: {name}.grad({args}) belongs to forward launch "
             f"#{number}, {self.launches - number} launches ago; the checker remembers the "
             f"last {self.history.maxlen} outside a Tape, so this adjoint's replay is not "
             "checked (record the launches in a ti.ad.Tape, or differentiate sooner)")

    def _latest_alike(self, compiled, scalars) -> Launch | None:
        try:
            return self.latest.get((compiled, scalars))
        except TypeError:    # an unhashable argument: look through the history
            for launch in reversed(self.history):
                if launch.compiled is compiled and launch.scalars == scalars:
                    return launch
            return None

    def boxes_written_since(self, fld, time: int):
        """The boxes of `fld` that may have been written after `time`, or None: unknown (the
        whole field may have changed). A backend that knows its launches' boxes says more."""
        return

    def unchanged_since(self, primal, values, since) -> bool:
        """Does `primal` hold `values` still? Only the boxes written since need comparing, where
        the checker knows them (boxes_written_since); otherwise the whole field."""
        boxes = self.boxes_written_since(primal, since)
        data = primal.data
        if boxes is None:
            return np.array_equal(data, values, equal_nan=True)
        for box in boxes:
            part = tuple(slice(lo, hi) for lo, hi in box)
            if not np.array_equal(data[part], values[part], equal_nan=True):
                return False
        return True

    def gradients_cleared(self, grads, time: int, fields_set=()) -> None:
        """Python scope (or a kernel zeroing them) set the gradients `grads` at `time`: what
        they held is gone, and with it the point each was taken at (its primal's values need no
        copy any more). A Tape clears them all at once (each mixin's part runs once for all),
        giving `fields_set`: every field it set, duals too (for a part keeping any)."""
        points, cleared_at = self.grad_point, self.grad_cleared_at
        for grad in grads:      # (dict.update(dict.fromkeys(...)) costs more for a few)
            cleared_at[grad] = time
        if points:
            for grad in grads:
                if points.pop(grad, None) is not None:
                    waiting = self.uncopied_points.get(grad.primal)
                    if waiting and grad in waiting:
                        waiting.remove(grad)
                        if not waiting:   # (an empty list would still ask each launch to look)
                            del self.uncopied_points[grad.primal]

    def before_write(self, fld) -> None:
        """`fld` is about to be written (by a kernel or Python scope): copy its values now for
        the gradients taken at them and not yet copied."""
        grads = self.uncopied_points.pop(fld, None)
        if not grads:
            return
        values = fld.data.copy()
        for grad in grads:
            held = self.grad_point.get(grad)
            if held is not None and held[0] is None:
                self.grad_point[grad] = (values, held[1], held[2])

    def python_read(self, fld, index, value):
        if self.tape is not None and fld.has_grad:
            self.python_reads[float(value)] = (fld, index, user_loc())

    def python_write(self, fld, index, loc=None) -> Access:
        """A Python-scope write to one element (index) or to the whole field (index None), at
        the user's line `loc` (None: found here); -> the Access it is (a backend's checker
        adds its own checks)."""
        access = Access("python write", loc or user_loc(), None, None, None, None, self.tick())
        if fld.role == "grad":
            self.gradients_cleared((fld,), access.time)
            self.lost.gradient_written(fld, index, access.loc)
        elif fld.role == "primal":
            self.primal_changed[fld] = access
            self.derived_outside_tape.pop(fld, None)    # set from Python: not derived
            if self.tape is not None:
                self.derived_in_tape[fld] = None
            if not index and self.races.tainted:    # the whole field (or its one element)
                self.races.forget(fld)
        else:
            self.twin_written(fld)
        return access

    def twin_written(self, fld) -> None:
        """Python scope wrote `fld`, a dual or an ndarray: a mixin's part (of a gradient too)."""

    def gradients_set(self, fields, loc, grads=None) -> int:
        """A Tape set these whole gradient (or dual) fields for the user's line `loc` (cleared
        them on entry, seeded its loss's): what python_write does with each, at one time for
        all (-> that time; a backend's checker adds its own part); `grads`: those that are
        gradients (None: picked out here). No before_write: it follows primal fields only."""
        time = self.tick()
        grads = [fld for fld in fields if fld.role == "grad"] if grads is None else grads
        self.gradients_cleared(grads, time, fields)
        lost = self.lost
        if lost.held_gradient or lost.cleared:    # (else gradient_written does nothing)
            for grad in grads:
                lost.gradient_written(grad, None, loc)
        if lost.sweeps.reads:       # (what sweeps.written does with a gradient)
            for fld in fields:
                lost.sweeps.written(fld)
        return time

    def python_copy(self, dst, src) -> None:
        """dst.copy_from(src) (after its python_write): dst is derived as src is. Inside a
        Tape, the copy reads src as a taped kernel would."""
        derived = beforetape.in_tape(self, src) if src in self.derived_in_tape else \
            self.derived_outside_tape.get(src)
        if self.tape is not None:
            if src not in self.derived_in_tape:
                beforetape.check_reads(self, CopyFacts(dst, src, user_loc()),
                                       f"{dst.name}.copy_from({src.name})", None)
            beforetape.wrote_every_row(self, dst)
        if derived is not None:
            derived = (f"{dst.name}.copy_from({src.name})", user_loc(), *derived[2:])
            (self.derived_in_tape if self.tape is not None else self.derived_outside_tape)[
                dst] = derived
