"""What the rule checker did during one plainly run call of a captured function, so that later
calls can replay it checked (tinyad/checkedreplay.py).

A checked replay runs the captured program without the checker, so it may replay only a call
whose checks came out the same whatever the fields held, and must leave the checker as the
plain call would. While the call runs, `Watch` looks on:

  * every value the checker reads from a field goes through the storage, which it spies on: a
    read that only copies values (for a later compare, a gradient's point), that looks for NaN
    and infinity in a gradient, or that is the Tape's own arithmetic is noted, with where in
    the call's events it came; so is a manual sweep's test a replay makes again, with its
    outcome (tinyad/checkpredicates.py); any other read decided something from values (an
    overwrite's compare inside a Tape, a recorded launch), and the call is not replayed;
  * anything written to stderr (a report, a warning, a note) and any violation the checker
    counts means the call is not replayed: a replay would say nothing;
  * the checker's state (tinyad/checkstate.py declares each attribute) is watched entry by
    entry: which entries the call read before it wrote them (a replay requires them to be as
    they were then, up to the order of their times) and which it wrote (set again by a replay,
    their times moved to the replay's). Its record of each launch is not watched: a replay
    leaves none (tinyad/checkedreplay.py says why that is safe).

`Watch.finish()` gives a `Watched`: what a replay must look for, copy, require and set.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import sys
from dataclasses import dataclass, field

import numpy as np

from tinyad import checkstate as cs
from tinyad.checkpredicates import Predicates
from tinyad.runtime import runtime

LOOK_UP = 24     # frames looked through for a kernel launch (is a copy made before one?)


@dataclass
class Watched:
    """One watched call, as its replays need it."""
    clocks: cs.Clocks
    consts: list            # (role, name, value at the start): the same when replayed
    empty: list             # (role, name): empty of pending entries when replayed
    guards: list            # (role, name, key, kind, normal form then): read before written
    writes: list            # (role, name, key, kind, value at the end): set by a replay
    appended: dict          # field -> the Python writes the call logged (python_writes)
    finite: list            # (position, field, rows): the checks looked for NaN there
    copies: list            # (position, field, slot): the checker's copies a replay makes
    copy_slots: dict        # id(an array the checker holds) -> slot
    launched: dict          # (traced, scalars) -> (number, time, pending?) of the call's latest
    pending: list           # the call's latest launches awaiting an adjoint (their records)
    kept_bytes: int         # the bytes of the checker's copies the call added, at most
    why_not: str | None = None
    predicates: list = field(default_factory=list)  # (position, event): tinyad/checkpredicates.py
    stashes: list = field(default_factory=list)     # (slot, field, shape) of their stashes


@dataclass
class _Sites:
    """The code of the checker's functions whose value reads a replay can stand for."""
    passing: set                                 # a storage's read handed on
    point: set = field(default_factory=set)      # a gradient's point copied (kept after)
    witness: set = field(default_factory=set)    # a replayed read's box copied
    finite: set = field(default_factory=set)     # NaN and infinity looked for
    arithmetic: set = field(default_factory=set)  # the Tape's own work, the recording's
    launch: object = None
    partial: object = None                       # tinyad/check/pointcopies.py PartialPoint


@functools.cache
def _sites() -> _Sites | None:
    """The checker's functions a watch knows, or None where they are not found (tinyad changed:
    then no call is replayed, rather than one watched wrongly)."""
    try:
        return _find_sites()
    except (AttributeError, ImportError, KeyError):
        return None


def _find_sites() -> _Sites:
    # (fast mode's modules: imported only when a checked fast-mode call is watched)
    from tinyad.check import launches, nonfinite
    from tinyad.check import pointcopies, replaycheck
    from tinyad.field import Field
    from tinyad.kernel import TracedKernel
    from tinyad.tapeops import _take_gradient
    sites = _Sites({Field.data.fget.__code__})
    sites.point = {launches.LaunchChecker.before_write.__code__,
                   pointcopies.PointCopies.before_kernel_write.__code__,
                   pointcopies.PointCopies.before_write.__code__}
    sites.witness = {replaycheck.WitnessChecker._copy.__code__,
                     replaycheck.WitnessChecker.before_write.__code__}
    sites.finite = {nonfinite.after_launch.__code__, nonfinite.Batch.finish.__code__}
    sites.arithmetic = {_take_gradient.__code__}
    sites.launch = TracedKernel.launch.__code__
    sites.partial = pointcopies.PartialPoint
    missing = [name for name in ("__init__", "restart", "save", "fill")
               if name not in vars(sites.partial)]
    if missing:
        raise AttributeError(missing[0])
    return sites


class Watch:
    """Looks on while one call of a captured function runs plainly with fast mode's checks
    (`start`, the call, `finish`; `stop` in any case)."""

    def __init__(self, checker):
        self.checker, self.recording = checker, None
        self.storage = runtime.backend.storage
        self.why_not: str | None = None
        self.installed = False
        self.finite: dict = {}          # (position, field) in order -> [rows of each look]
        self.last_finite = self.last_array = None   # the look noted last, the array it read
        self.point_reads: dict = {}     # field -> (position) of the last point copy of it
        self.point_copies: dict = {}    # id(array) -> (position, field)
        self.partial: dict = {}         # id(a PartialPoint) -> [(what, position, box)] of the call
        self.predicates = Predicates(self)   # the checks' reads that decide, as predicates
        self.reports = 0

    # ---- before the call ------------------------------------------------------------------
    def start(self, recording) -> None:
        """Before the call: `recording` is tinyad/capture.py's record of its events."""
        self.recording = recording
        missing = cs.undeclared(self.checker)
        if missing:
            self.why_not = f"the checker holds {missing[0]}, which a replay knows nothing of"
            return
        self.objects = cs.state_objects(self.checker)
        c = self.checker
        sites = _sites()      # (the recording storage of tinyad/capture.py reads for itself)
        if sites is None:
            self.why_not = "its checker's functions are not those tinyad/checkwatch.py knows"
            return
        recording = type(self.recording.storage)
        sites.passing.add(recording.to_host.__code__)
        sites.arithmetic.update((recording.set_element.__code__,    # (x[i] = v: it writes)
                                 type(self.storage).set_element.__code__))
        self.consts = [(role, name, obj.__dict__[name]) for role, obj in self.objects.items()
                       for name, how in cs.CHECKER_STATE[role].items()
                       if how == "const" and name in obj.__dict__]
        self.keeps = [(role, name, len(obj.__dict__[name]))
                      for role, obj in self.objects.items()
                      for name, how in cs.CHECKER_STATE[role].items()
                      if how == "keep" and hasattr(obj.__dict__.get(name), "__len__")]
        tick, version = c.tick(), c.next_version()
        c.tick, c.next_version = cs.fresh_counter(tick + 1), cs.fresh_counter(version + 1)
        self.clocks = cs.Clocks(tick, version, c.launches, c.tapes)
        self.kept_bytes = c.kept_bytes
        self.logs = {fld: (log, {id(w) for w in log}) for fld, log in c.python_writes.items()}
        self._watch_containers()
        self.to_host = self.storage.to_host
        self.storage.__dict__["to_host"] = self._read
        self.host, c.host = c.host, self._read
        self.report, c.report = c.report, self._report
        self.warn_once, c.lost.warn_once = c.lost.warn_once, self._warn_once
        self._watch_partial_points()
        self.predicates.install()
        self.stderr = cs.install_stderr()
        self.installed = True

    def _watch_partial_points(self) -> None:
        """What the call does with the points of large fields copied box by box (their class's
        methods, watched while it runs)."""
        PartialPoint = _sites().partial
        self.partial_class = PartialPoint
        self.partial_methods = {name: PartialPoint.__dict__[name]
                                for name in ("__init__", "restart", "save", "fill")}
        methods = {name.strip("_"): method for name, method in self.partial_methods.items()}
        watch = self

        def noted(what):
            def method(point, *args):
                if what != "save" or args[0] not in point.saved:
                    position = len(watch.recording.events)
                    if what == "save":    # (before the launch that writes the box)
                        position = watch._launch_at(sys._getframe(1), position)
                    watch.partial.setdefault(id(point), []).append(
                        (what, position, args[0] if what == "save" else None))
                return methods[what](point, *args)
            return method
        for name in ("__init__", "restart", "save", "fill"):
            setattr(PartialPoint, name, noted(name.strip("_")))

    def _watch_containers(self) -> None:
        self.attribute_logs, self.containers = {}, {}
        for role, obj in self.objects.items():
            kinds = {name: how for name, how in cs.CHECKER_STATE[role].items()
                     if isinstance(how, tuple)}
            for name, (container, kind, *how) in kinds.items():
                value = obj.__dict__[name]
                if container == "dict":
                    on_set = self._point_set if (role, name) == ("checker", "grad_point") \
                        else None
                    obj.__dict__[name] = cs.WatchedDict(value, kind, on_set, how == ["pop"])
                elif container == "set":
                    obj.__dict__[name] = cs.WatchedSet(value)
                if container in ("dict", "set"):
                    self.containers[(role, name)] = obj.__dict__[name]
            log = cs.AttributeLog(kinds)
            obj.__dict__["_watch_log"] = log
            self.attribute_logs[role] = log
            peaks = ["kept_bytes"] if "kept_bytes" in obj.__dict__ else []
            if peaks:
                log.peak = obj.__dict__["kept_bytes"]
            obj.__class__ = cs._watching_class(type(obj), sorted(kinds) + peaks)

    # ---- during it ------------------------------------------------------------------------
    def _read(self, fld):
        """The storage's to_host, spied on: what read this value, and what for."""
        if self.why_not is None:
            self._classify(sys._getframe(1), fld)
        values = self.to_host(fld)
        if self.last_finite is not None and self.last_finite[1] is fld:
            self.last_array = values       # (what `looked_in` may be told the rows of)
        return values

    def _classify(self, frame, fld) -> None:
        sites = _sites()
        while frame.f_code in sites.passing:
            frame = frame.f_back
        code, position = frame.f_code, len(self.recording.events)
        if code in sites.finite:
            # after the launch that wrote the gradient (or the Tape's backward, at its end)
            key = (self._launch_at(frame, position - 1) + 1, fld)
            self.finite.setdefault(key, []).append(None)   # (all of it, or `looked_in`'s rows)
            self.last_finite = key
        elif code in sites.point:
            # before a launch's writes, or before a Python-scope write (recorded as it happens)
            self.point_reads[fld] = self._launch_at(frame, position)
        elif code not in sites.witness and code not in sites.arithmetic and \
                not self.predicates.accepts(code):
            self.why_not = (f"its checks looked at the values of {fld.name} "
                            f"({code.co_name}): a replay would not")

    def looked_in(self, data, rows) -> None:
        """The rows (lo, hi) of the field the look noted last looked at (a large gradient's
        after an adjoint: those it added to), from tinyad/check/nonfinite.py `_first_in`
        looking in `data`: only where that is the array the look read (else all of it stays)."""
        if self.last_finite is not None and data is self.last_array:
            self.finite[self.last_finite][-1] = rows
        self.last_finite = self.last_array = None

    def _launch_at(self, frame, otherwise: int) -> int:
        """The position among the events of the launch running now (its event, where the
        recording has it already; else the next), or `otherwise` outside any launch."""
        launch = _sites().launch
        for _ in range(LOOK_UP):
            frame = frame.f_back
            if frame is None:
                return otherwise
            if frame.f_code is launch:
                launching, position = self.recording.launching
                return position if launching is frame else len(self.recording.events)
        return otherwise

    def _point_set(self, grad, held) -> None:
        """grad_point[grad] = (values, ...): note which copy its values are."""
        values = held[0] if isinstance(held, tuple) else None
        if self.why_not is None and isinstance(values, np.ndarray) and \
                id(values) not in self.point_copies:
            position = self.point_reads.get(grad.primal)
            if position is None:
                self.why_not = f"the checker kept values of {grad.primal.name} unseen"
            else:
                self.point_copies[id(values)] = (position, grad.primal)

    def _report(self, error):
        self.reports += 1
        return self.report(error)

    def _warn_once(self, report):
        self.reports += 1
        return self.warn_once(report)

    # ---- after it -------------------------------------------------------------------------
    def stop(self) -> None:
        """Put everything back as it was (the call's values stay)."""
        if not self.installed:
            return
        self.installed = False
        c = self.checker
        sys.stderr = self.stderr.inner
        del self.storage.__dict__["to_host"]
        del c.__dict__["report"], c.lost.__dict__["warn_once"]    # (their classes' again)
        c.host = self.host
        for name, method in self.partial_methods.items():
            setattr(self.partial_class, name, method)
        self.predicates.uninstall()
        for role, obj in self.objects.items():
            obj.__class__ = type(obj).__mro__[1]
            del obj.__dict__["_watch_log"]
            for name in cs.CHECKER_STATE[role]:
                value = obj.__dict__.get(name)
                if isinstance(value, cs.WatchedDict):
                    obj.__dict__[name] = dict(dict.items(value))
                elif isinstance(value, cs.WatchedSet):
                    obj.__dict__[name] = set(set.__iter__(value))

    def finish(self, events) -> Watched | None:
        """After the call (and `stop`): what its replays need, or None with `why_not` said."""
        self.stop()
        if self.why_not is None:
            self.why_not = self._problem()
        if self.why_not is not None:
            return None
        c = self.checker
        self.clocks.moved(c.tick(), c.next_version(), c.launches, c.tapes)
        guards, writes = self._reads_and_writes()
        copies, slots = self._copies(writes)
        predicates, stashes = self.predicates.events(len(slots))
        watched = Watched(self.clocks, self.consts, self._empty(), guards, writes,
                          self._appended(), _looks(self.finite), copies, slots,
                          self._launched(), self._pending(),
                          self.attribute_logs["checker"].peak - self.kept_bytes,
                          predicates=predicates, stashes=stashes)
        self.why_not = _unmovable(watched)
        return watched if self.why_not is None else None

    def _problem(self) -> str | None:
        if self.reports or self.stderr.count:
            return "its checks reported something"
        for role, name, value in self.consts:
            if self.objects[role].__dict__.get(name) is not value and \
                    self.objects[role].__dict__.get(name) != value:
                return f"it ended with the checker's {name} changed"
        for role, name, size in self.keeps:
            if len(self.objects[role].__dict__[name]) != size:
                return "its checks said something once"
        return None

    def _empty(self) -> list:
        return [(role, name) for role, names in cs.CHECKER_STATE.items()
                for name, how in names.items() if how == "empty"]

    def _reads_and_writes(self) -> tuple:
        """-> (guards, writes) of Watched: the entries the call read before writing them, with
        their normal forms then; the entries it wrote, with their values at its end."""
        guards, writes = [], []
        for role, obj in self.objects.items():
            log = self.attribute_logs[role]
            for name, form in log.reads.items():
                guards.append((role, name, None, log.kinds[name][1], form))
            for name, (container, kind, *_) in log.kinds.items():
                watched = self.containers.get((role, name))
                if watched is not None:
                    if watched.whole:
                        guards.append((role, name, cs.WHOLE, kind, cs.whole_form(watched.start)))
                    else:
                        guards += [(role, name, key, kind if value else "presence",
                                    _read_form(watched, key, value))
                                   for key, value in watched.read_keys.items()]
                        guards += [(role, name, (cs.EMPTINESS, written), kind, answer)
                                   for written, answer in watched.emptiness.items()]
                if name in log.written:           # a value set, or the container replaced
                    value = obj.__dict__[name]
                    if container == "dict":
                        value = {k: cs.frozen(kind, v) for k, v in value.items()}
                    writes.append((role, name, None, kind, cs.frozen(kind, value)))
                elif watched is not None:
                    final = obj.__dict__[name]
                    for key in watched.written:
                        value = cs.entry(final, key)
                        if value is cs.ABSENT and watched.start.get(key, cs.ABSENT) is cs.ABSENT:
                            continue      # (popped where it was not there: nothing to repeat)
                        writes.append((role, name, key, kind, cs.frozen(kind, value)))
        return guards, writes

    def _copies(self, writes) -> tuple:
        """The checker's copies the call's end still holds (a gradient's point: a whole copy,
        or a large field's box by box), as copies a replay makes: [(position, field, slot,
        box)], {id(array): slot}."""
        copies, slots = [], {}
        points = {id(p.values): (fld, p) for fld, p in self.checker.partial_points.items()}
        for role, name, key, kind, value in writes:
            if kind == "PP" and value is not cs.ABSENT:
                held = id(value.values)
            elif kind == "PT" and isinstance(value, tuple) and value[0] is not None:
                held = id(value[0])
            else:
                continue
            if held in slots:
                continue
            slots[held] = slot = len(slots)
            if held in points:
                self._partial_copies(*points[held], slot, copies)
            elif held in self.point_copies:
                position, fld = self.point_copies[held]
                copies.append((position, fld, slot, ()))
            else:
                self.why_not = self.why_not or "the checker holds a copy made before the call"
        return copies, slots

    def _partial_copies(self, fld, point, slot, copies) -> None:
        """A large field's point, box by box: its boxes as the call saved them."""
        done = self.partial.get(id(point), [])
        starts = [i for i, (what, _, _) in enumerate(done) if what in ("init", "restart")]
        if not starts or any(what == "fill" for what, _, _ in done[starts[-1]:]):
            self.why_not = self.why_not or (f"the checker holds part of {fld.name}'s values "
                                            "from before the call")
            return
        saves = done[starts[-1] + 1:]
        rows = sorted(box[0] for _, _, box in saves if box)
        if saves and len(rows) == len(saves) and \
                all(a[1] <= b[0] for a, b in itertools.pairwise(rows)):
            # No two boxes share a row: each row is saved before anything writes it after the
            # point was taken, so all hold what they held at the first save; one copy of those
            # rows then does (what a point holds outside its boxes is never looked at)
            copies.append((saves[0][1], fld, slot, (rows[0][0], rows[-1][1])))
            return
        for what, position, box in saves:
            copies.append((position, fld, slot, sum(box, ())))

    def _appended(self) -> dict:
        """The Python writes the call logged, per field. Of its writes of a whole field only the
        last: the log is looked through for the latest write after a time, or whether any
        whole one came after it, which the last answers as all of them would."""
        appended = {}
        for fld, log in self.checker.python_writes.items():
            _, ids = self.logs.get(fld, (None, set()))
            new = [w for w in log if id(w) not in ids]
            last_whole = max((i for i, w in enumerate(new) if w.box is None), default=None)
            new = [type(w)(w.site, w.box, w.kind, dataclasses.replace(w.access))
                   for i, w in enumerate(new) if w.box is not None or i == last_whole]
            if new:
                appended[fld] = new
        return appended

    def _pending(self) -> list:
        first = self.clocks.launch
        return [launch for launch in self.checker.latest.values()
                if launch.number > first and not launch.tape and not launch.adjoint_runs]

    def _launched(self) -> dict:
        first = self.clocks.launch
        return {key: (launch.number, launch.time, not launch.tape and not launch.adjoint_runs)
                for key, launch in self.checker.latest.items() if launch.number > first}


def _looks(finite: dict) -> list:
    """[(position, field, rows)]: the looks for NaN at each place, the rows of a field they
    looked at flat ((lo, hi) of its leading index, a hull; (): all of it)."""
    looks = []
    for (position, fld), rows in finite.items():
        hull = () if any(r is None for r in rows) else \
            (int(min(lo for lo, _ in rows)), int(max(hi for _, hi in rows)))
        looks.append((position, fld, hull))
    return looks


def _read_form(watched, key, value_read: bool):
    form = watched.start.get(key, cs.ABSENT)
    return form if value_read else cs.presence(form)


def _unmovable(watched: Watched) -> str | None:
    """Why the values the call wrote cannot be moved to a replay's times, or None: each time
    in them must be the call's own or one it read from the state before it."""
    _, read_ticks, read_versions = cs.split_times([form for *_, form in watched.guards])
    read_ticks, read_versions = set(read_ticks), set(read_versions)
    call = watched.clocks
    for role, name, key, kind, value in watched.writes:
        whole = key is None and isinstance(value, (dict, set)) and \
            cs.CHECKER_STATE[role][name][0] != "scalar"
        items = (list(value.values()) if isinstance(value, dict) else []) if whole else [value]
        for item in items:
            _, ticks, versions = cs.split_times(cs.norm(kind, item))
            if any(0 < t <= call.tick and t not in read_ticks for t in ticks):
                return f"the checker's {name} holds a time from before the call"
            if any(0 < v <= call.version and v not in read_versions for v in versions):
                return f"the checker's {name} holds a version from before the call"
    return None
