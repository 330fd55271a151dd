"""The rule checker's state as later checks see it, comparable across two runs of a program:
what a checked replay (tinyad/checkedreplay.py) must leave as the plain call leaves it.

`state(checker)` gives every entry tinyad/checkstate.py watches, fields named by their names,
the checker's times replaced by their order (a later check compares times, never reads them),
and its launch and Tape counts. The record of each launch is left out: a replay keeps none (a
kernel.grad() of one of its launches says so, tested on its own). Of the log of Python writes,
what its readers can tell apart: each write of elements, and the latest write of a whole field.
"""
from tinyad import checkstate as cs


def state(checker) -> dict:
    forms = {}
    for role, obj in cs.state_objects(checker).items():
        for name, how in cs.CHECKER_STATE[role].items():
            value = obj.__dict__.get(name)
            if how == "counter":
                forms[role, name] = value
            elif how == "log":
                forms[role, name] = _whole({fld: tuple(
                    (w.box, w.kind, cs.norm("A", w.access)) for w in _as_read(log))
                    for fld, log in value.items()})
            elif isinstance(how, tuple):
                container, kind = how[:2]
                if container == "scalar":
                    forms[role, name] = _named(cs.norm(kind, value))
                elif container == "dict":
                    forms[role, name] = _whole({k: cs.norm(kind, v) for k, v in value.items()})
                else:
                    forms[role, name] = _whole(dict.fromkeys(value, True))
    forms["checker", "kept values"] = _kept_values(checker)
    keys = list(forms)
    shape, ticks, versions = cs.split_times([forms[k] for k in keys])
    order = {"T#": cs.order_of(ticks), "V#": cs.order_of(versions)}
    return {k: _ordered(form, order) for k, form in zip(keys, shape)}


def _kept_values(checker) -> tuple:
    """The values the checker keeps of each gradient's point (on the boxes a large field's
    point holds), as bytes: a later manual sweep compares them."""
    points = {id(p.values): p for p in checker.partial_points.values()}
    kept = []
    for grad, (values, _, _) in checker.grad_point.items():
        if values is None:
            continue
        point = points.get(id(values))
        boxes = sorted(point.saved) if point is not None else [()]
        kept.append((grad.name, tuple(
            values[tuple(slice(lo, hi) for lo, hi in box)].tobytes() for box in boxes)))
    return tuple(sorted(kept))


def differences(one: dict, other: dict) -> list:
    """The entries (object, attribute) where two states differ."""
    return [k for k in one if one[k] != other.get(k)]


def _as_read(log: list) -> list:
    last_whole = max((i for i, w in enumerate(log) if w.box is None), default=None)
    return [w for i, w in enumerate(log) if w.box is not None or i == last_whole]


def _name(key):
    if isinstance(getattr(key, "name", None), str):
        return key.name
    if hasattr(key, "ir"):
        return key.ir.name
    if isinstance(key, tuple):
        return tuple(_name(k) for k in key)
    return repr(key)


def _named(form):
    if isinstance(form, tuple):
        return tuple(_named(f) for f in form)
    if isinstance(form, frozenset):
        return tuple(sorted(str(_name(f)) for f in form))
    if not isinstance(form, str) and isinstance(getattr(form, "name", None), str):
        return ("field", form.name)
    report = getattr(getattr(form, "error", None), "report", None) or \
        (form if hasattr(form, "to_dict") and hasattr(form, "rule") else None)
    if report is not None:       # (the error a gradient owes, a race's report: by what they say)
        return ("report", str(report.to_dict()))
    return form


def _whole(forms: dict) -> tuple:
    return tuple(sorted(((str(_name(k)), _named(f)) for k, f in forms.items()),
                        key=lambda entry: entry[0]))


def _ordered(form, order: dict):
    if isinstance(form, tuple):
        if len(form) == 2 and form[0] in order and isinstance(form[1], int):
            return (form[0], order[form[0]][form[1]])
        return tuple(_ordered(f, order) for f in form)
    return form
