"""A checked replay's predicates (tinyad/checkpredicates.py) as the captured program runs them:
Stash (copy a box of a field into an entry of a stash array), Compare (a box with a stashed
entry) and Nonzero (any nonzero in some boxes of a field). A predicate that comes out otherwise
than in the watched call stops the program (ProgramStopped), and the call runs plainly.

Each test decides exactly what the rule checker's own test decides, or is stricter (then a
clean call may run plainly, never a bad one replay):
  * Nonzero: `.any()` of the boxes, as tinyad/check/adjoints.py `_seeded` looks;
  * Compare "same": equal, NaN equal to NaN (np.array_equal(equal_nan=True), as a gradient's
    point is compared);
  * Compare "close": tinyad/check/changes.py `differences` finds none; compiled, with half its
    tolerance, figured in f64, so no rounding of f32's makes it pass where that fails.

`source(...)` writes one as lines of compile/sequence.py's generated function; `run(...)` runs
one from Python (a program whose kernels use threads).
"""
from __future__ import annotations

import numpy as np

from tinyad.backend import ProgramStopped
from tinyad.check.changes import ROUNDING_ULPS, differences

STOPPED = -3     # what the compiled program returns where a predicate came out otherwise
KINDS = ("stash", "compare", "nonzero")
TOLERANCE = ROUNDING_ULPS  # of a box's largest value, as the judge's compare (check/changes.py)


def _pairs(bounds: list) -> list:
    return list(zip(bounds[::2], bounds[1::2]))


def _part(pairs: list) -> str:
    return ", ".join(f"{lo}:{hi}" for lo, hi in pairs)


def source(seq, event, delta, pad: str) -> str:
    """The generated lines of a predicate event (`seq`: compile/sequence.py's writer)."""
    deltas = delta or (0,) * len(event.scalars)
    bounds = [seq._bound(s, d) for s, d in zip(event.scalars, deltas)]
    array, name = seq._array(event.field), event.field.name
    stop = f"\n{pad}    return {STOPPED}"
    if event.kind == "nonzero":
        dims = 2 * len(event.field.shape)
        boxes = [_pairs(bounds[i:i + dims]) for i in range(0, len(bounds), dims)] if dims else []
        tests = " or ".join(f"np.any({array}[{_part(box)}])" for box in boxes) or \
            f"np.any({array})"
        return f"{pad}if ({tests}) != {event.expect}:  # {name} seeded?{stop}"
    entry, box = bounds[0], _pairs(bounds[1:])
    stash = seq._buffer(event.slot)
    if box:
        field_part = f"{array}[{_part(box)}]"
        stash_part = f"{stash}[{entry}, " + ", ".join(f"0:({hi}) - ({lo})" for lo, hi in box) + "]"
    else:         # (all of the field, flat: a 0-D field's too)
        field_part, stash_part = f"{array}.reshape({array}.size)", f"{stash}[{entry}]"
    if event.kind == "stash":
        return f"{pad}{stash_part}[:] = {field_part}  # stash {name}"
    if event.how == "close" and np.dtype(event.field.dtype.np).kind == "f":
        tolerance = seq._number(TOLERANCE * float(np.finfo(event.field.dtype.np).eps), False)
        test = f"close({field_part}, {stash_part}, {tolerance})"
    else:
        test = f"same({field_part}, {stash_part})"
    return f"{pad}if not {test}:  # {name} as stashed?{stop}"


def run(event, storage, buffers) -> None:
    """Run a predicate event from Python; ProgramStopped where it comes out otherwise."""
    array = storage.to_host(event.field)
    dims = len(event.field.shape)
    if event.kind == "nonzero":
        step = 2 * dims
        boxes = [event.scalars[i:i + step] for i in range(0, len(event.scalars), step)] \
            if dims else []
        found = any(np.any(array[_slices(b)]) for b in boxes) if boxes else bool(np.any(array))
        if found != event.expect:
            raise ProgramStopped(f"{event.field.name}'s seed is not as it was when captured")
        return
    entry, box = event.scalars[0], event.scalars[1:]
    now = array[_slices(box)] if box else array.reshape(-1)
    held = buffers[event.slot][entry]
    if box:
        held = held[tuple(slice(0, hi - lo) for lo, hi in _pairs(list(box)))]
    if event.kind == "stash":
        held[...] = now
    elif not _alike(event.how, now, held):
        raise ProgramStopped(f"{event.field.name} is not as it was when captured")


def _slices(flat) -> tuple:
    return tuple(slice(lo, hi) for lo, hi in _pairs(list(flat)))


def _alike(how: str, now, before) -> bool:
    if how == "close":
        return differences(before, now) is None
    return bool(np.array_equal(now, before, equal_nan=now.dtype.kind == "f"))


HELPERS = '''

@njit(error_model="numpy", cache=True)
def same(now, before):
    for a, b in zip(now.flat, before.flat):
        if a != b and not (a != a and b != b):
            return False
    return True


@njit(error_model="numpy", cache=True)
def close(now, before, tolerance):
    scale = 0.0
    for b in before.flat:
        if b == b and abs(float(b)) > scale:
            scale = abs(float(b))
    for a, b in zip(now.flat, before.flat):
        if a == b or (a != a and b != b):
            continue
        if not (np.isfinite(a) and np.isfinite(b)):
            return False
        if not abs(float(a) - float(b)) <= 0.5 * tolerance * (scale + abs(float(b))):
            return False
    return True

'''
