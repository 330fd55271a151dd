"""The rule checker's state as a checked replay of a captured call sees it (tinyad/checkwatch.py
watches a call, tinyad/checkedreplay.py replays it).

`CHECKER_STATE` declares every attribute of the checker's objects: how a call that is watched
tracks it, and how a replay treats it. The watched ones are swapped, for the call, for
`WatchedDict` / `WatchedSet` (or, for single values, read through properties of a subclass the
object is given for the call), which note the entries the call read before it wrote them and
those it wrote. Values are compared in a normal form (`norm`) where the checker's times count
only by their order (`ranked`), and a replay's values are the call's moved to the replay's
times (`Renumber`).
"""
from __future__ import annotations

import dataclasses
import itertools
import sys

import numpy as np

from tinyad.check.report import Access

ABSENT = "<absent>"      # a key not in a dict (its normalized value)


class _Whole:
    def __repr__(self):
        return "<the whole container>"


WHOLE = _Whole()         # the key of a guard on a whole container (the call looked at all)


class _Emptiness:
    def __repr__(self):
        return "<whether it is empty>"


EMPTINESS = _Emptiness()  # in the key of a guard on a container's emptiness (`if points:`)


# ---- how each attribute of the checker's objects is watched -----------------------------------
# "const": the same at the start and end of the call, and when replayed; "keep": not changed by a
# call that reports nothing (notes and warnings said once); "memo": a cache, right whatever it
# holds; "launch": the record of launches, which a replay forgets; "counter": launch and Tape
# numbers; "special": the clocks and the value reader; ("scalar"|"dict"|"set", kind): watched,
# kind saying how its values are compared and moved (see `norm`), and "pop" where the checker
# pops an entry only to be rid of it (only whether it was there is read); "log": Python writes,
# a list per field only added to; "empty": must be empty when replayed.
CHECKER_STATE = {
    "checker": {
        "mode": "const", "tick": "special", "launches": "counter", "tapes": "counter",
        "history": "launch", "awaiting_adjoint": "launch", "taped": "launch", "latest": "launch",
        "undifferentiated": "launch", "forgotten": "launch", "forgotten_noted": "keep",
        "replay_forgotten": "memo", "replay_retired": "memo", "find_launch": "special",
        "tape": "const", "backward_loc": ("scalar", "P"),
        "taint": ("dict", "P"), "python_reads": ("dict", "P"), "in_custom_grad": "const",
        "in_custom_primal": "const", "custom_forwards": "launch", "custom_recording": "const",
        "custom_running": "const", "problems": "keep",
        "grad_accumulated_at": ("dict", "T"), "grad_cleared_at": ("dict", "T"),
        "grad_warned_at": ("dict", "T"),
        "hand_gradient_at": ("dict", "T"), "grad_read_at": ("dict", "T"),
        "last_adjoint_at": ("scalar", "T"), "primal_changed": ("dict", "A"),
        "grad_point": ("dict", "PT", "pop"),
        "uncopied_points": ("dict", "P"), "derived_outside_tape": ("dict", "P", "pop"),
        "derived_in_tape": ("dict", "P"), "written_in_tape": ("dict", "P"),
        "warned_in_tape": ("set", "P"), "paths_checked": "memo", "lost": "const",
        "races": "const",
        # the witness's (tinyad/check/replaycheck.py, pointcopies.py; check/nonfinite.py)
        "host": "special", "python_writes": "log", "reads": "launch", "buffers": "launch",
        "kept": "launch", "kept_bytes": "launch", "dropped_noted": "keep",
        "versions": ("dict", "V"), "next_version": "special", "waiting": "launch",
        "waiting_spans": "launch", "waiting_live": "launch", "waiting_fixed": "launch",
        "waiting_limit": "launch", "differentiating": "const", "released_noted": "keep",
        "partial_points": ("dict", "PP"), "checks_nonfinite": "const",
        "nonfinite_seen": ("dict", "T", "pop"), "nonfinite_owed": ("dict", "P", "pop"),
        "nonfinite_warned": "keep", "nonfinite_batch": "const", "nonfinite_batching": "const",
        "evidence_of": "const", "evidence_kept": "launch",    # (tinyad/check/readevidence.py)
    },
    "lost": {   # tinyad/check/lostgrads.py
        "checker": "const", "warned": "keep", "cut": ("dict", "P", "pop"),
        "unwritten_loss": ("scalar", "P"), "tape_loc": ("scalar", "P"),
        "backward_at": ("scalar", "T"), "backward_loc": ("scalar", "P"),
        "read_at": ("dict", "T"), "held_gradient": ("set", "P"), "cleared": ("dict", "P", "pop"),
        "sweeps": "const", "used": "const", "loaded": "const",
    },
    "sweeps": {   # tinyad/check/sweeps.py
        "checker": "const", "warn": "const", "adjoint_at": ("scalar", "T"),
        "python_wrote": ("dict", "T"), "checked": "memo", "reads": ("dict", "P"),
        "passed": "empty",
    },
    "races": {"tainted": ("dict", "P", "pop"), "verdicts": "launch", "warned": "keep"},
}


def state_objects(checker) -> dict:
    """The checker's objects whose state CHECKER_STATE declares, by its names for them."""
    return {"checker": checker, "lost": checker.lost, "sweeps": checker.lost.sweeps,
            "races": checker.races}


def undeclared(checker) -> list:
    """Attributes of the checker's objects CHECKER_STATE does not declare ("object.name")."""
    return [f"{role}.{name}" for role, obj in state_objects(checker).items()
            for name in vars(obj) if name not in CHECKER_STATE[role]]


# ---- values: normalized for the replay's compare, and moved to the replay's times ------------
# A value's normal form keeps what a later check can tell apart, with every time of the
# checker's clock as ("T", t) and every version as ("V", v): two states are alike when their
# normal forms are equal once each such time is replaced by its rank among the times (so that
# only their order counts: the checker only ever compares times).

def norm(kind: str, value):
    if value is ABSENT or value is None:
        return value
    if kind == "T":
        return ("T", value)
    if kind == "V":
        return ("V", value)
    if kind == "A":
        return _norm_access(value)
    if kind == "PT":
        values, sweep, time = value
        return ("PT", values is None, _norm_access(sweep), ("T", time))
    if kind == "PP":        # (a PartialPoint, tinyad/check/pointcopies.py: which boxes it holds)
        return ("PP", frozenset(value.saved), value.complete)
    return _plain(value)


def _norm_access(a: Access):
    shown = a.value if isinstance(a.value, (int, float, str, type(None))) else "value"
    return ("A", a.kind, a.loc, a.kernel, a.launch, a.iteration, shown, ("T", a.time),
            a.reported)


def _plain(value):
    """A plain value as a comparable, hashable-free form: containers as tuples of their items."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *(_plain(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _plain(v)) for k, v in value.items()))
    if isinstance(value, np.ndarray):
        return ("array", id(value))
    return value


def whole_form(forms: dict) -> tuple:
    """A container's normal form, {key: normal form of its entry}, in an order of its own."""
    return tuple(sorted(((id(k), k, form) for k, form in forms.items()), key=lambda e: e[0]))


def split_times(forms) -> tuple:
    """`forms` apart from their times: (their shape, each time ("T", t) as ("T#", i) and each
    version as ("V#", j); the times t in order; the versions in order). Two lists of forms are
    alike when their shapes are equal and their times (versions) fall in the same order."""
    ticks, versions = [], []
    return _split(forms, ticks, versions), ticks, versions


def _split(form, ticks: list, versions: list):
    if type(form) is tuple:
        if len(form) == 2 and type(form[1]) is int and form[0] in ("T", "V"):
            held = ticks if form[0] == "T" else versions
            held.append(form[1])
            return (form[0] + "#", len(held) - 1)
        return tuple([_split(item, ticks, versions) for item in form])
    if type(form) is list:
        return [_split(item, ticks, versions) for item in form]
    return form


def order_of(values: list) -> tuple:
    """Each value's rank among them (equal values alike): what a list of times tells apart."""
    rank = {v: r for r, v in enumerate(sorted(set(values)))}
    return tuple(rank[v] for v in values)


class Clocks:
    """The checker's clocks at the start of a call, and how far the call moved them."""

    def __init__(self, tick: int, version: int, launch: int, tape: int):
        self.tick, self.version, self.launch, self.tape = tick, version, launch, tape
        self.ticks = self.versions = self.launches = self.tapes = 0

    def moved(self, tick: int, version: int, launch: int, tape: int) -> None:
        self.ticks, self.versions = tick - self.tick, version - self.version
        self.launches, self.tapes = launch - self.launch, tape - self.tape


class Renumber:
    """Moves the values a watched call wrote to a replay of it: a time of the call to the same
    place in the replay's, a time it read from the state before it to the one the replay's state
    holds there (`earlier`: the call's time -> the replay's, from the compare of the two)."""

    def __init__(self, call: Clocks, replay: Clocks, earlier_ticks: dict, earlier_versions: dict,
                 copies: dict):
        self.call, self.replay = call, replay
        self.earlier_ticks, self.earlier_versions = earlier_ticks, earlier_versions
        self.copies = copies           # id(an array the call's checker copied) -> its copy now

    def tick(self, t):
        if t is None or t <= 0:
            return t
        if t > self.call.tick:
            return t - self.call.tick + self.replay.tick
        return self.earlier_ticks[t]

    def version(self, v):
        if v is None or v <= 0:
            return v
        if v > self.call.version:
            return v - self.call.version + self.replay.version
        return self.earlier_versions[v]

    def launch(self, n):
        if n is None or n <= self.call.launch:
            return n
        return n - self.call.launch + self.replay.launch

    def access(self, a: Access) -> Access:
        # (not dataclasses.replace: 8x slower)
        return Access(a.kind, a.loc, a.kernel, self.launch(a.launch), a.iteration, a.value,
                      self.tick(a.time), a.reported)

    def value(self, kind: str, value):
        if value is ABSENT or value is None:
            return value
        if kind == "T":
            return self.tick(value)
        if kind == "V":
            return self.version(value)
        if kind == "A":
            return self.access(value)
        if kind == "PT":
            values, sweep, time = value
            if values is not None:
                values = self.copies[id(values)]
            return (values, self.access(sweep), self.tick(time))
        if kind == "PP":
            point = object.__new__(type(value))
            point.values, point.saved = self.copies[id(value.values)], set(value.saved)
            point.complete = False
            return point
        return _copied(value)


def frozen(kind: str, value):
    """A written value as it is now (the checker changes some in place later: Access.time of a
    kernel's write, the lists of uncopied points), for a replay to set."""
    if kind == "A" and isinstance(value, Access):
        return dataclasses.replace(value)
    if kind == "PT" and isinstance(value, tuple):
        return (value[0], dataclasses.replace(value[1]), value[2])
    if kind == "PP" and value is not ABSENT:
        point = object.__new__(type(value))
        point.values, point.saved, point.complete = value.values, set(value.saved), False
        return point
    return _copied(value)


def _copied(value):
    """A plain value to set again: its containers new (the checker changes them in place)."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, set):
        return set(value)
    return value


# ---- watched containers ---------------------------------------------------------------------

class WatchedDict(dict):
    """A checker's dict while a call is watched: the keys it reads before it writes them, the
    keys it writes, and whether it looked at all of it (iterating, its length). `start`: the
    normal form of each entry when the watch began (values change in place: Access.time)."""

    def __init__(self, data, kind: str, on_set=None, pop_presence=False):
        super().__init__(data)
        self.kind, self.on_set, self.pop_presence = kind, on_set, pop_presence
        self.start = {k: norm(kind, v) for k, v in data.items()}
        self.read_keys: dict = {}       # key -> True: its value read; False: only whether there
        self.written: set = set()
        self.whole = False
        self.emptiness: dict = {}       # keys written before a look at its emptiness -> answer

    def __bool__(self):
        return _emptiness_read(self, dict.__len__(self))

    def _read(self, key, value=True):
        if key not in self.written and not self.read_keys.get(key):
            self.read_keys[key] = value

    def _touch(self, key, value):
        """A key's value read: a container value may be changed in place from here on."""
        self._read(key)
        if isinstance(value, (list, dict, set)):
            self.written.add(key)
        return value

    def __getitem__(self, key):
        return self._touch(key, dict.__getitem__(self, key))

    def get(self, key, default=None):
        return self._touch(key, dict.get(self, key, default))

    def __contains__(self, key):
        self._read(key, False)
        return dict.__contains__(self, key)

    def __setitem__(self, key, value):
        self.written.add(key)
        dict.__setitem__(self, key, value)
        if self.on_set is not None:
            self.on_set(key, value)

    def __delitem__(self, key):
        self._read(key, False)
        self.written.add(key)
        dict.__delitem__(self, key)

    def pop(self, key, *default):
        self._read(key, not self.pop_presence)
        self.written.add(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key, default=None):
        self._read(key)
        self.written.add(key)
        return dict.setdefault(self, key, default)

    def _all(self):
        self.whole = True

    def __iter__(self):
        self._all()
        return dict.__iter__(self)

    def __len__(self):
        self._all()
        return dict.__len__(self)

    def keys(self):
        self._all()
        return dict.keys(self)

    def values(self):
        self._all()
        return dict.values(self)

    def items(self):
        self._all()
        return dict.items(self)

    def __eq__(self, other):
        self._all()
        return dict.__eq__(self, other)

    __hash__ = None

    def copy(self):
        self._all()
        return dict(dict.items(self))

    def update(self, *args, **kwargs):
        """Writes of the keys given (nothing read: as many __setitem__)."""
        entries = dict(*args, **kwargs)
        self.written.update(entries)
        dict.update(self, entries)

    def clear(self):
        self._all()
        self.written.update(dict.keys(self))
        dict.clear(self)

    def popitem(self):
        self._all()
        key, value = dict.popitem(self)
        self.written.add(key)
        return key, value


class WatchedSet(set):
    """A checker's set while a call is watched (as WatchedDict: its elements are the keys)."""

    def __init__(self, data):
        super().__init__(data)
        self.kind = "P"
        self.start = {k: True for k in data}
        self.read_keys: dict = {}       # (as WatchedDict's: only whether each is there)
        self.written: set = set()
        self.whole = False
        self.emptiness: dict = {}

    def __bool__(self):
        return _emptiness_read(self, set.__len__(self))

    def _read(self, key):
        if key not in self.written and key not in self.read_keys:
            self.read_keys[key] = False

    def __contains__(self, key):
        self._read(key)
        return set.__contains__(self, key)

    def add(self, key):
        self.written.add(key)
        set.add(self, key)

    def discard(self, key):
        self._read(key)
        self.written.add(key)
        set.discard(self, key)

    def remove(self, key):
        self._read(key)
        self.written.add(key)
        set.remove(self, key)

    def __iter__(self):
        self.whole = True
        return set.__iter__(self)

    def __len__(self):
        self.whole = True
        return set.__len__(self)

    __hash__ = None

    def __eq__(self, other):
        self.whole = True
        return set.__eq__(self, other)


def _emptiness_read(container, length: int) -> bool:
    """`bool(container)`: a look at whether it is empty. Where an entry the call wrote is there,
    the call's own write decides; otherwise the answer is whether an entry from before the call
    that it has not written yet is there, which a replay requires to come out alike (a guard
    keyed (EMPTINESS, the keys written so far): tinyad/checkedreplay.py `_form`)."""
    if not any(_holds(container, key) for key in container.written):
        written = frozenset(container.written)
        container.emptiness.setdefault(written, bool(set(container.start) - written))
    return length > 0


def _holds(container, key) -> bool:
    return (dict.__contains__ if isinstance(container, dict) else set.__contains__)(container, key)


PRESENT = "<present>"    # the normal form of an entry whose value the call did not read


def presence(form):
    """The normal form of an entry of which only whether it is there was read."""
    return form if form is ABSENT else PRESENT


def entry(container, key):
    """`container[key]` as the watch compares it (ABSENT when missing; True for a set's)."""
    if isinstance(container, (set, frozenset)):
        return True if set.__contains__(container, key) else ABSENT
    return dict.get(container, key, ABSENT)


# ---- watched objects: their scalar attributes through properties ------------------------------

_WATCHING_CLASSES: dict = {}


def _watching_class(cls, names):
    """A subclass of `cls` whose instances report reads and writes of the attributes `names`
    to their `_watch_log` (swapped in as the object's class while a call is watched)."""
    key = (cls, tuple(names))
    made = _WATCHING_CLASSES.get(key)
    if made is None:
        made = type(f"Watched{cls.__name__}", (cls,),
                    {name: _watched_property(name) for name in names})
        _WATCHING_CLASSES[key] = made
    return made


def _watched_property(name):
    if name == "kept_bytes":
        return _peak_property(name)

    def get(obj):
        try:
            value = obj.__dict__[name]
        except KeyError:
            raise AttributeError(name) from None
        obj.__dict__["_watch_log"].read(name, value)
        return value

    def put(obj, value):
        obj.__dict__["_watch_log"].written.add(name)
        obj.__dict__[name] = value
    return property(get, put)


def _peak_property(name):
    """An attribute whose highest value during the call is all the watch keeps (the bytes of
    the checker's copies: a replay must not start where the call's would pass its budget)."""
    def get(obj):
        return obj.__dict__[name]

    def put(obj, value):
        log = obj.__dict__["_watch_log"]
        log.peak = max(log.peak, value)
        obj.__dict__[name] = value
    return property(get, put)


class AttributeLog:
    """The watched scalar attributes of one object the call read before writing (their normal
    forms then) and wrote; and its watched containers the call replaced whole."""

    def __init__(self, kinds: dict):
        self.kinds = kinds
        self.reads: dict = {}
        self.written: set = set()
        self.peak = 0            # the highest kept_bytes

    def read(self, name, value) -> None:
        if name not in self.written and name not in self.reads:
            kind = self.kinds[name]
            if kind[0] == "scalar":
                self.reads[name] = norm(kind[1], value)


def fresh_counter(start: int):
    """A clock for the checker (its `tick`, `next_version`) going on from `start`."""
    return itertools.count(start).__next__


class StderrCount:
    """sys.stderr while a call is watched: counts what is written to it (a report, a warning,
    a note means the call is not replayed), and writes it on."""

    def __init__(self, inner):
        self.inner = inner
        self.count = 0

    def write(self, text):
        if text:
            self.count += 1
        return self.inner.write(text)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def install_stderr() -> StderrCount:
    counter = StderrCount(sys.stderr)
    sys.stderr = counter
    return counter
