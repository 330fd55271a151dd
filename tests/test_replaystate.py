"""A checked replay's compare and set of the checker's state, made once into straight-line
Python (tinyad/replaystate.py), decide and set what the normal forms of tinyad/checkstate.py
would: the guards' answer is compared with the plain compare of all normal forms (their shape,
the order of their times) on states changed one entry at a time, and the writes with
checkstate.Renumber's values."""
import itertools
from types import SimpleNamespace

from tinyad import checkstate as cs
from tinyad import replaystate
from tinyad.check.report import Access
from tinyad.core.srcloc import SrcLoc

LOC = SrcLoc("prog.py", 3)


def _objects(**checker):
    """State objects of the roles a replay knows: the checker's attributes as given."""
    base = {"grad_point": {}, "derived_in_tape": {}, "grad_read_at": {}, "versions": {},
            "primal_changed": {}, "warned_in_tape": set(), "last_adjoint_at": None,
            "backward_loc": None, "taint": {}}
    base.update(checker)
    return {"checker": SimpleNamespace(**base), "lost": SimpleNamespace(),
            "sweeps": SimpleNamespace(), "races": SimpleNamespace()}


def _plain_alike(guards, objects):
    """The compare by normal forms, all at once (what a replay did before the tables)."""
    then = cs.split_times([form for *_, form in guards])
    now = cs.split_times([replaystate.form_of(objects, role, name, key, kind)
                          for role, name, key, kind, _ in guards])
    if now[0] != then[0] or cs.order_of(now[1]) != cs.order_of(then[1]) or \
            cs.order_of(now[2]) != cs.order_of(then[2]):
        return None
    return dict(zip(then[1], now[1])), dict(zip(then[2], now[2]))


def _guards(objects):
    """Guards of every way a replay reads an entry, as a watch notes them on `objects`."""
    c = objects["checker"].__dict__
    return [
        ("checker", "grad_point", "x.grad", "presence", cs.PRESENT),
        ("checker", "grad_point", "u.grad", "presence", cs.ABSENT),
        ("checker", "derived_in_tape", "v", "P", cs.ABSENT),
        ("checker", "derived_in_tape", (cs.EMPTINESS, frozenset()), "P", True),
        ("checker", "derived_in_tape", (cs.EMPTINESS, frozenset({"x"})), "P", False),
        ("checker", "warned_in_tape", (cs.EMPTINESS, frozenset()), "P", False),
        ("checker", "derived_in_tape", "x", "P", cs.norm("P", c["derived_in_tape"]["x"])),
        ("checker", "backward_loc", None, "P", cs.norm("P", c["backward_loc"])),
        ("checker", "grad_read_at", "x.grad", "T", cs.norm("T", c["grad_read_at"]["x.grad"])),
        ("checker", "grad_read_at", "u.grad", "T", cs.norm("T", c["grad_read_at"]["u.grad"])),
        ("checker", "last_adjoint_at", None, "T", cs.norm("T", c["last_adjoint_at"])),
        ("checker", "versions", "x", "V", cs.norm("V", c["versions"]["x"])),
        ("checker", "versions", "v", "V", cs.norm("V", c["versions"]["v"])),
        ("checker", "primal_changed", "x", "A", cs.norm("A", c["primal_changed"]["x"])),
        ("checker", "taint", cs.WHOLE, "P", cs.whole_form(
            {k: cs.norm("P", v) for k, v in c["taint"].items()})),
    ]


def _state():
    return _objects(grad_point={"x.grad": (None, None, 4)}, derived_in_tape={"x": ("k", LOC)},
                    grad_read_at={"x.grad": 7, "u.grad": 7}, last_adjoint_at=5,
                    versions={"x": 3, "v": 8}, taint={"x": 1},
                    primal_changed={"x": Access("store", LOC, "k", 2, None, None, 6)},
                    backward_loc=LOC)


# Each changes one entry of the state the guards were taken on: some keep the compare's answer
# (times moved, their order kept), others change it
CHANGES = {
    "times moved, in order": lambda c: c.__dict__.update(
        grad_read_at={"x.grad": 70, "u.grad": 70}, last_adjoint_at=50,
        primal_changed={"x": Access("store", LOC, "k", 2, None, None, 60)},
        versions={"x": 30, "v": 80}),
    "two equal times told apart": lambda c: c.grad_read_at.update({"u.grad": 8}),
    "a time's order changed": lambda c: setattr(c, "last_adjoint_at", 9),
    "a versions' order changed": lambda c: c.versions.update({"v": 1}),
    "a time gone": lambda c: c.grad_read_at.pop("x.grad", None),
    "a time not a number": lambda c: setattr(c, "last_adjoint_at", None),
    "an Access's line": lambda c: c.primal_changed.update(
        {"x": Access("store", SrcLoc("prog.py", 4), "k", 2, None, None, 6)}),
    "an entry now there": lambda c: c.grad_point.update({"u.grad": 1}),
    "an entry gone": lambda c: c.grad_point.clear(),
    "an absent entry there": lambda c: c.derived_in_tape.update({"v": 1}),
    "a set not empty": lambda c: c.warned_in_tape.add("y"),
    "a value changed": lambda c: c.derived_in_tape.update({"x": ("j", LOC)}),
    "a whole dict changed": lambda c: c.taint.update({"y": 2}),
    "an attribute changed": lambda c: setattr(c, "backward_loc", SrcLoc("prog.py", 9)),
    "nothing": lambda c: None,
}


def test_the_guards_decide_as_the_compare_of_all_normal_forms():
    """Every pair of changes: the made function's answer is the plain compare's."""
    answers = set()
    for first, second in itertools.product(CHANGES, repeat=2):
        guards = _guards(_state())                      # (as the watched call read them)
        objects = _state()
        made = replaystate.Guards(guards, objects)
        CHANGES[first](objects["checker"])
        CHANGES[second](objects["checker"])
        expected = _plain_alike(guards, objects)
        assert made.alike() == expected, (first, second, made.source)
        answers.add(expected is None)
    assert answers == {True, False}       # (both answers came out)


def test_the_writes_set_what_renumber_makes():
    call = cs.Clocks(100, 50, 10, 0)
    call.moved(120, 60, 14, 1)
    sweep = Access("sweep", LOC, "k", 12, None, None, 90)     # (a time from before the call)
    writes = [
        ("checker", "grad_read_at", "x.grad", "T", 115),        # the call's time
        ("checker", "grad_read_at", "u.grad", "T", 90),         # one it read
        ("checker", "grad_read_at", "v.grad", "T", cs.ABSENT),  # let go
        ("checker", "versions", "x", "V", 55),
        ("checker", "primal_changed", "x", "A", Access("store", LOC, "k", 12, None, 1.5, 110)),
        ("checker", "primal_changed", "v", "A", Access("store", LOC, "k", 3, None, None, 104)),
        ("checker", "grad_point", "x.grad", "PT", ("values", sweep, 111)),
        ("checker", "derived_in_tape", "x", "P", ["k", LOC]),
        ("checker", "warned_in_tape", "z", "P", True),
        ("checker", "last_adjoint_at", None, "T", 117),
        ("checker", "backward_loc", None, "P", LOC),
        ("checker", "taint", None, "P", {"x": [1]}),
    ]
    objects = _objects(grad_read_at={"v.grad": 1})
    made = replaystate.Writes(writes, objects, call)
    replay = cs.Clocks(1000, 500, 40, 3)
    move = cs.Renumber(call, replay, {90: 900}, {}, {id("values"): "copy"})
    made.apply(replay.tick, replay.version, replay.launch, move)
    c = objects["checker"]
    assert c.grad_read_at == {"x.grad": move.tick(115), "u.grad": 900}
    assert c.versions == {"x": move.version(55)}
    assert c.primal_changed["x"] == move.access(writes[4][4])
    assert c.primal_changed["v"] == move.access(writes[5][4])
    assert c.primal_changed["x"] is not writes[4][4]          # (made anew: changed in place)
    assert c.grad_point["x.grad"] == move.value("PT", writes[6][4]) == \
        ("copy", Access("sweep", LOC, "k", 42, None, None, 900), move.tick(111))
    assert c.derived_in_tape["x"] == ["k", LOC] and c.derived_in_tape["x"] is not writes[7][4]
    assert c.warned_in_tape == {"z"}
    assert (c.last_adjoint_at, c.backward_loc) == (move.tick(117), LOC)
    assert c.taint == {"x": [1]} and c.taint["x"] is not writes[11][4]["x"]
