"""The checker's state as a checked replay compares and sets it, worked out once per watched
call (tinyad/checkedreplay.py replays; tinyad/checkstate.py declares the state and its normal
forms; tinyad/checkwatch.py watches the call).

A replay runs on every call of a captured function, so its Python is paid per call, and a
time loop's call can be shorter than a millisecond. What it does with the checker's state is
the same at each replay of one watched call, so it is made into tables once:

  * `Consts`: the attributes that must be as they were (one C-level getter per object);
  * `Guards`: the entries the watched call read before writing them, which must be as they
    were then (up to the order of their times). Each is compared in the cheapest form that
    decides what its normal form would: of an entry whose presence only was read, and of a
    look at a container's emptiness, set operations on the container, one per container; of an
    entry whose form holds no time, its form; only the forms holding times are split apart
    from their times and compared by their order (checkstate.split_times), as a whole;
  * `Writes`: the entries the call wrote, set again. A value holding no time is set as it is
    (a container: a new one of it, as checkstate.Renumber would make); a time or a version
    the call made is the replay's by one addition; any other value is moved by Renumber.
"""
from __future__ import annotations

from operator import itemgetter

from tinyad import checkstate as cs
from tinyad.check.report import Access


def form_of(objects: dict, role: str, name: str, key, kind: str):
    """The normal form now of the entry a guard (role, name, key, kind) is about."""
    value = objects[role].__dict__.get(name)
    if key is None:
        return cs.norm(kind, value)
    if kind == "presence":
        return cs.presence(cs.entry(value, key))
    if type(key) is tuple and key[0] is cs.EMPTINESS:     # (any entry not written yet)
        return bool(set(value) - key[1])
    if key is cs.WHOLE:
        if isinstance(value, set):
            return cs.whole_form(dict.fromkeys(value, True))
        return cs.whole_form({k: cs.norm(kind, v) for k, v in value.items()})
    return cs.norm(kind, cs.entry(value, key))


def _equal(a, b) -> bool:
    """As a list's compare tells two of its items apart (the same object is equal)."""
    return a is b or bool(a == b)


class Consts:
    """The attributes (role, name, value) that a replay requires as the watched call began with
    them (a missing one as None)."""

    def __init__(self, consts: list, objects: dict):
        self.consts = [(objects[role], name, value) for role, name, value in consts]
        by_object: dict = {}
        for role, name, value in consts:
            names, values = by_object.setdefault(role, ([], []))
            names.append(name)
            values.append(value)
        # (one getter per object: a tuple of its attributes, or one where it has one)
        self.checks = [(objects[role].__dict__, itemgetter(*names),
                        tuple(values) if len(values) > 1 else values[0])
                       for role, (names, values) in by_object.items()]

    def hold(self) -> bool:
        for attrs, get, then in self.checks:
            try:
                now = get(attrs)
            except KeyError:       # (an attribute not there: None, compared one by one)
                return self._hold_one_by_one()
            if not _equal(now, then):
                return False
        return True

    def _hold_one_by_one(self) -> bool:
        return all(_equal(obj.__dict__.get(name), value) for obj, name, value in self.consts)


class Guards:
    """The watched call's guards, (role, name, key, kind, normal form then), as tables."""

    def __init__(self, guards: list, objects: dict):
        self.objects = objects
        keys: dict = {}        # (role, name) -> (keys there, keys not there)
        self.emptiness = []    # (attrs, name, keys written, answer): a look at its emptiness
        self.forms = []        # (role, name, key, kind, form): forms holding no time
        self.timed = []        # (role, name, key, kind, form then) of forms holding times
        for role, name, key, kind, form in guards:
            _, ticks, versions = cs.split_times([form])
            if ticks or versions:
                self.timed.append((role, name, key, kind, form))
            elif key is None or key is cs.WHOLE:
                self.forms.append((role, name, key, kind, form))
            elif type(key) is tuple and key[0] is cs.EMPTINESS:
                self.emptiness.append((objects[role].__dict__, name, key[1], form))
            elif kind == "presence" or form is cs.ABSENT:   # (only whether it is there)
                keys.setdefault((role, name), ([], []))[form is cs.ABSENT].append(key)
            else:
                self.forms.append((role, name, key, kind, form))
        self.keys = [(objects[role].__dict__, name, frozenset(there), frozenset(not_there))
                     for (role, name), (there, not_there) in keys.items()]
        self.times = _Times(self.timed, objects)

    def alike(self):
        """Are the entries as they were, up to the order of their times? -> ({the call's
        time: the replay's}, {its version: the replay's}) of the entries' times, or None."""
        for attrs, name, there, not_there in self.keys:
            value = attrs[name]
            keys = value.keys() if isinstance(value, dict) else value
            if not keys >= there or not keys.isdisjoint(not_there):
                return None
        for attrs, name, written, answer in self.emptiness:   # (an entry not written there?)
            if written.issuperset(attrs[name]) == answer:
                return None
        objects = self.objects
        for role, name, key, kind, form in self.forms:
            if not _equal(form_of(objects, role, name, key, kind), form):
                return None
        return self.times.alike()


class _Times:
    """The guards whose forms hold times: alike when their forms are but for the times, and
    their times (versions) fall in the same order. An entry whose form is a time (a version)
    is read as a number; an Access, by its fields and its time; any other entry's form is made
    and split (checkstate.split_times, one guard at a time: its times come in the same order
    as in a split of all, and its form apart from them is compared with its own then)."""

    def __init__(self, timed: list, objects: dict):
        self.objects = objects
        self.readers = []      # (how, attrs, role, name, key, kind, the form's rest then)
        for role, name, key, kind, form in timed:
            how = _how_read(key, kind, form)
            rest = (form[:7] + form[8:]) if how == "access" else \
                cs.split_times([form])[0] if how == "form" else None
            self.readers.append((how, objects[role].__dict__, role, name, key, kind, rest))
        _, ticks, versions = cs.split_times([form for *_, form in timed])
        self.then = (cs.order_of(ticks), cs.order_of(versions), ticks, versions)

    def alike(self):
        ticks, versions = [], []
        for how, attrs, role, name, key, kind, rest in self.readers:
            if how == "form":
                shape, its_ticks, its_versions = cs.split_times(
                    [form_of(self.objects, role, name, key, kind)])
                if shape != rest:
                    return None
                ticks += its_ticks
                versions += its_versions
                continue
            value = attrs.get(name)
            if key is not None:
                value = cs.entry(value, key)
            if how == "access":
                if value is None or value is cs.ABSENT or type(value.time) is not int:
                    return None
                form = cs.norm("A", value)
                if not _equal(form[:7] + form[8:], rest):
                    return None
                ticks.append(value.time)
            elif type(value) is not int:
                return None
            else:
                (ticks if how == "T" else versions).append(value)
        tick_order, version_order, then_ticks, then_versions = self.then
        if cs.order_of(ticks) != tick_order or cs.order_of(versions) != version_order:
            return None
        return dict(zip(then_ticks, ticks)), dict(zip(then_versions, versions))


def _how_read(key, kind: str, form) -> str:
    """How `_Times` reads a guard's entry: "T" or "V" (its form is that time or version),
    "access" (an Access's form, its time the only one), or "form"."""
    if key is cs.WHOLE or kind == "presence" or (type(key) is tuple and key[0] is cs.EMPTINESS):
        return "form"
    if kind in ("T", "V") and type(form) is tuple and len(form) == 2 and form[0] == kind and \
            type(form[1]) is int:
        return kind
    if kind == "A" and type(form) is tuple and len(form) == 9 and form[0] == "A":
        rest = form[:7] + form[8:]
        _, ticks, versions = cs.split_times([rest])
        time = form[7]
        if not ticks and not versions and type(time) is tuple and len(time) == 2 and \
                time[0] == "T" and type(time[1]) is int:
            return "access"
    return "form"


class Writes:
    """The watched call's writes, (role, name, key, kind, value at its end), as tables: each
    entry's container (an object's attributes, or one of them) by its number in `targets`."""

    def __init__(self, writes: list, objects: dict, call: cs.Clocks):
        self.targets: list = []    # (an object's __dict__, the name of its container or None)
        numbers: dict = {}
        self.ticks = []            # (target, key, time - the call's first): a time it made
        self.versions = []         # (target, key, version - the call's first): one it made
        self.fixed = []            # (target, key, value): a value holding no time
        self.made = []             # (target, key, make, value): a new container, make(value)
        self.moved = []            # (target, key, kind, value): checkstate.Renumber's
        self.moved_dicts = []      # (target, key, kind, value): a dict of those
        # (target, key, its fields up to its launch, that launch or how far into the call's,
        # its fields after, its time - the call's first): an Access of the call
        self.accesses = []
        self.added, self.removed = [], []    # (target, key): of a set; let go
        for role, name, key, kind, value in writes:
            attrs = objects[role].__dict__
            container = cs.CHECKER_STATE[role][name][0]
            where = (id(attrs), name if key is not None else None)
            if where not in numbers:
                numbers[where] = len(self.targets)
                self.targets.append((attrs, where[1]))
            target = numbers[where]
            if key is None:
                key = name
                if container == "dict":
                    self._dict(target, key, kind, value)
                    continue
                if container == "set":
                    self.made.append((target, key, set, value))
                    continue
            elif value is cs.ABSENT:
                self.removed.append((target, key))
                continue
            elif container == "set":
                self.added.append((target, key))
                continue
            self._value(target, key, kind, value, call)

    def _dict(self, target, key, kind: str, value: dict) -> None:
        """A dict replaced whole."""
        if kind == "P" and not any(isinstance(v, (list, dict, set)) for v in value.values()):
            self.made.append((target, key, dict, value))   # (its values are set as they are)
        else:
            self.moved_dicts.append((target, key, kind, value))

    def _value(self, target, key, kind: str, value, call: cs.Clocks) -> None:
        if value is None or value is cs.ABSENT:
            self.fixed.append((target, key, value))
        elif kind in ("T", "V") and type(value) is int:
            first = call.tick if kind == "T" else call.version
            if value <= 0:
                self.fixed.append((target, key, value))
            elif value > first:
                (self.ticks if kind == "T" else self.versions).append(
                    (target, key, value - first))
            else:              # (a time the call read: where the replay's compare found it)
                self.moved.append((target, key, kind, value))
        elif kind == "A" and isinstance(value, Access) and type(value.time) is int and \
                value.time > call.tick:
            launch = value.launch
            moves = launch is not None and launch > call.launch
            self.accesses.append((target, key, (value.kind, value.loc, value.kernel),
                                  launch - call.launch if moves else launch, moves,
                                  (value.iteration, value.value), value.time - call.tick,
                                  value.reported))
        elif kind == "P":
            make = next((made for made in (list, dict, set) if isinstance(value, made)), None)
            if make is None:
                self.fixed.append((target, key, value))
            else:
                self.made.append((target, key, make, value))
        else:
            self.moved.append((target, key, kind, value))

    def apply(self, move: cs.Renumber) -> None:
        """Set each entry, its times moved by `move` (the watched call's to the replay's)."""
        targets = [attrs if name is None else attrs[name] for attrs, name in self.targets]
        tick, version = move.replay.tick, move.replay.version
        for target, key, after in self.ticks:
            targets[target][key] = tick + after
        for target, key, after in self.versions:
            targets[target][key] = version + after
        for target, key, value in self.fixed:
            targets[target][key] = value
        launch = move.replay.launch
        for target, key, (kind, loc, kernel), number, moves, (iteration, value), after, \
                reported in self.accesses:     # (as Renumber.access makes it)
            targets[target][key] = Access(kind, loc, kernel, launch + number if moves else number,
                                          iteration, value, tick + after, reported)
        for target, key, make, value in self.made:
            targets[target][key] = make(value)
        for target, key, kind, value in self.moved:
            targets[target][key] = move.value(kind, value)
        for target, key, kind, value in self.moved_dicts:
            targets[target][key] = {k: move.value(kind, v) for k, v in value.items()}
        for target, key in self.added:
            targets[target].add(key)
        for target, key in self.removed:
            container = targets[target]
            if isinstance(container, set):
                container.discard(key)
            else:
                container.pop(key, None)
