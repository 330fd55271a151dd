"""The checker's state as a checked replay compares and sets it, worked out once per watched
call (tinyad/checkedreplay.py replays; tinyad/checkstate.py declares the state and its normal
forms; tinyad/checkwatch.py watches the call).

A replay runs on every call of a captured function, so its Python is paid per call, and a
time loop's call can take less than a millisecond. What it does with the checker's state is
the same at each replay of one watched call, so it is worked out once, into straight-line
Python (as dataclasses makes an `__init__`): a line an entry.

  * `Consts`: the attributes that must be as they were (one C-level getter per object);
  * `Guards`: the entries the watched call read before writing them, which must be as they
    were then, up to the order of their times. Each is compared in the cheapest form that
    decides what its normal form would: of an entry whose presence only was read (or found
    absent), whether it is there; of a look at a container's emptiness, whether an entry the
    call had not written yet was there; of a form holding no time, the form; of a time, a
    version or an Access, the number (and the Access's fields); any other form holding times
    is split apart from them (checkstate.split_times). The times then must fall in the order
    the call's did: one chained compare;
  * `Writes`: the entries the call wrote, set again. A value holding no time is set as it is
    (a container: a new one of it, as checkstate.Renumber would make); a time or a version
    the call made is the replay's by one addition, an Access of the call is made with them;
    any other value is moved by Renumber.

`source` of each is the function's text.
"""
from __future__ import annotations

import itertools
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


class _Source:
    """A function's lines, made once: the values they name are its closure's (`k0`, `k1`,
    ...), and the objects' attributes `a0`, `a1`, ... (by the roles of checkstate)."""

    def __init__(self, objects: dict):
        self.values: list = []
        self.names: dict = {}           # id(a value) -> its name
        self.attrs = {role: self.name(obj.__dict__) for role, obj in objects.items()}
        self.helpers = {"objects": objects, "form_of": form_of, "equal": _equal,
                        "norm": cs.norm, "entry": cs.entry, "ABSENT": cs.ABSENT,
                        "split_times": cs.split_times, "Access": Access}
        self.lines: list = []

    def name(self, value) -> str:
        if id(value) not in self.names:
            self.names[id(value)] = f"k{len(self.values)}"
            self.values.append(value)
        return self.names[id(value)]

    def where(self, role: str, name: str, key=None) -> str:
        """The attribute, or its entry `key`, as an expression."""
        attribute = f"{self.attrs[role]}[{name!r}]"
        return attribute if key is None else f"{attribute}[{self.name(key)}]"

    def function(self, signature: str):
        """-> (the function, its text)."""
        body = "\n".join(f"        {line}" for line in self.lines) or "        pass"
        text = (f"def make({', '.join(f'k{i}' for i in range(len(self.values)))}):\n"
                f"    def {signature}:\n{body}\n    return {signature.split('(')[0]}\n")
        namespace = dict(self.helpers)
        exec(compile(text, f"<checked replay: {signature}>", "exec"), namespace)  # noqa: S102
        return namespace["make"](*self.values), text


class Guards:
    """The watched call's guards, (role, name, key, kind, normal form then), made into one
    function: `alike()` -> ({the call's time: the replay's}, {its version: the replay's}) of
    the entries' times where they are alike, else None."""

    def __init__(self, guards: list, objects: dict):
        self.out = out = _Source(objects)
        timed, ticks, versions = [], [], []
        for role, name, key, kind, form in guards:
            _, its_ticks, its_versions = cs.split_times([form])
            if its_ticks or its_versions:
                timed.append((role, name, key, kind, form))
            elif key is None or key is cs.WHOLE:
                out.lines.append(f"if not equal(form_of(objects, {role!r}, {name!r}, "
                                 f"{out.name(key)}, {kind!r}), {out.name(form)}): return None")
            elif type(key) is tuple and key[0] is cs.EMPTINESS:
                _emptiness(out, out.where(role, name), key[1], form)
            elif kind == "presence" or form is cs.ABSENT:   # (only whether it is there)
                there = "not in" if form is not cs.ABSENT else "in"
                out.lines.append(f"if {out.name(key)} {there} {out.where(role, name)}: "
                                 "return None")
            else:
                out.lines.append(f"if not equal(norm({kind!r}, entry({out.where(role, name)}, "
                                 f"{out.name(key)})), {out.name(form)}): return None")
        for guard in timed:
            _timed(out, guard, ticks, versions)
        _in_order(out, ticks)
        _in_order(out, versions)
        found = [", ".join(f"{then}: {now}" for then, now in pairs) for pairs in (ticks, versions)]
        out.lines.append(f"return {{{found[0]}}}, {{{found[1]}}}")
        self.alike, self.source = out.function("alike()")


def _emptiness(out: _Source, where: str, written: frozenset, answer: bool) -> None:
    """A look at whether a container was empty: whether an entry the call had not written
    yet was there (`bool(set(value) - written)`) must be `answer` again."""
    there = f"{where}" if not written else f"not {out.name(written)}.issuperset({where})"
    out.lines.append(f"if {'not ' if answer else ''}{there}: return None")


def _timed(out: _Source, guard: tuple, ticks: list, versions: list) -> None:
    """The lines reading a guard whose form holds times into variables, each noted with its
    time then in `ticks` (`versions`) as (then, its variable)."""
    role, name, key, kind, form = guard
    now = f"t{len(ticks) + len(versions)}"
    value = f"{out.attrs[role]}.get({name!r})"
    if key is not None:
        value = f"entry({value}, {out.name(key)})"
    how = _how_read(key, kind, form)
    if how in ("T", "V"):
        out.lines += [f"{now} = {value}", f"if type({now}) is not int: return None"]
        (ticks if how == "T" else versions).append((form[1], now))
    elif how == "access":
        rest = form[:7] + form[8:]
        out.lines += [f"{now} = {value}",
                      (f"if {now} is None or {now} is ABSENT or type({now}.time) is not int: "
                       "return None"),
                      f"f = norm('A', {now})",
                      f"if not equal(f[:7] + f[8:], {out.name(rest)}): return None",
                      f"{now} = {now}.time"]
        ticks.append((form[7][1], now))
    else:
        shape, its_ticks, its_versions = cs.split_times([form])
        out.lines += [(f"s = split_times([form_of(objects, {role!r}, {name!r}, "
                       f"{out.name(key)}, {kind!r})])"),
                      f"if s[0] != {out.name(shape)}: return None"]
        for held, then, at in ((ticks, its_ticks, 1), (versions, its_versions, 2)):
            names = [f"t{len(ticks) + len(versions) + i}" for i in range(len(then))]
            if names:
                out.lines.append(f"{', '.join(names)}, = s[{at}]")
                held += zip(then, names)


def _in_order(out: _Source, times: list) -> None:
    """The times now must fall in the order of the times then (equal where those are): one
    chained compare, in the order of those."""
    if len(times) < 2:
        return
    ordered = sorted(times, key=lambda pair: pair[0])
    chain = ordered[0][1]
    for (before, _), (then, now) in itertools.pairwise(ordered):
        chain += f" {'==' if then == before else '<'} {now}"
    out.lines.append(f"if not ({chain}): return None")


def _how_read(key, kind: str, form) -> str:
    """How a guard's entry whose form holds times is read: "T" or "V" (its form is that time
    or version), "access" (an Access's form, its time the only one), or "form"."""
    if key is cs.WHOLE or kind == "presence" or (type(key) is tuple and key[0] is cs.EMPTINESS):
        return "form"
    if kind in ("T", "V") and type(form) is tuple and len(form) == 2 and form[0] == kind and \
            type(form[1]) is int:
        return kind
    if kind == "A" and type(form) is tuple and len(form) == 9 and form[0] == "A":
        _, ticks, versions = cs.split_times([form[:7] + form[8:]])
        time = form[7]
        if not ticks and not versions and type(time) is tuple and len(time) == 2 and \
                time[0] == "T" and type(time[1]) is int:
            return "access"
    return "form"


class Writes:
    """The watched call's writes, (role, name, key, kind, value at its end), made into one
    function: `apply(tick, version, launch, move)` sets each entry, its times moved to the
    replay's (its first tick, version and launch; `move` a checkstate.Renumber for the rest)."""

    def __init__(self, writes: list, objects: dict, call: cs.Clocks):
        self.out = out = _Source(objects)
        for role, name, key, kind, value in writes:
            container = cs.CHECKER_STATE[role][name][0]
            where = out.where(role, name, key)
            if key is None and container == "dict":
                out.lines.append(f"{where} = {_whole_dict(out, kind, value)}")
            elif key is None and container == "set":
                out.lines.append(f"{where} = set({out.name(value)})")
            elif key is not None and value is cs.ABSENT:      # (let go)
                whole = out.where(role, name)
                out.lines.append(f"_ = {whole}.discard({out.name(key)}) if isinstance({whole}, "
                                 f"set) else {whole}.pop({out.name(key)}, None)")
            elif key is not None and container == "set":
                out.lines.append(f"{out.where(role, name)}.add({out.name(key)})")
            else:
                out.lines.append(f"{where} = {_value(out, kind, value, call)}")
        self.apply, self.source = out.function("apply(tick, version, launch, move)")


def _whole_dict(out: _Source, kind: str, value: dict) -> str:
    if kind == "P" and not any(isinstance(v, (list, dict, set)) for v in value.values()):
        return f"dict({out.name(value)})"      # (its values are set as they are)
    return f"{{k: move.value({kind!r}, v) for k, v in {out.name(value)}.items()}}"


def _value(out: _Source, kind: str, value, call: cs.Clocks) -> str:
    """A written value as the expression making it again (checkstate.Renumber.value's)."""
    if value is None or value is cs.ABSENT:
        return out.name(value)
    if kind in ("T", "V") and type(value) is int:
        first, now = (call.tick, "tick") if kind == "T" else (call.version, "version")
        if value <= 0:
            return repr(value)
        if value > first:
            return f"{now} + {value - first}"
    elif kind == "A" and isinstance(value, Access) and type(value.time) is int and \
            value.time > call.tick:
        launch = value.launch
        number = f"launch + {launch - call.launch}" if launch is not None and \
            launch > call.launch else out.name(launch)
        fields = [out.name(value.kind), out.name(value.loc), out.name(value.kernel), number,
                  out.name(value.iteration), out.name(value.value),
                  f"tick + {value.time - call.tick}", out.name(value.reported)]
        return f"Access({', '.join(fields)})"
    elif kind == "PT" and type(value) is tuple and len(value) == 3 and \
            isinstance(value[1], Access):      # (a gradient's point: its copy, sweep, time)
        values, sweep, time = value
        held = "None" if values is None else f"move.copies[{id(values)}]"
        return f"({held}, {_value(out, 'A', sweep, call)}, {_value(out, 'T', time, call)})"
    elif kind == "P":
        make = next((made for made in (list, dict, set) if isinstance(value, made)), None)
        return out.name(value) if make is None else f"{make.__name__}({out.name(value)})"
    return f"move.value({kind!r}, {out.name(value)})"
