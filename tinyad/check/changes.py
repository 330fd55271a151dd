"""The judge's verdicts on values changed outside the launch that read them (check/trail.py
judges what happens within one launch's trail):

  * a Python-scope write inside the Tape changed an element a launch of the Tape read for its
    adjoint: Rule 1 from Python scope (`python_overwrite`);
  * an adjoint replays a read and the element holds another value than the forward read
    (`replay_divergence`), whatever changed it;
  * a grad_for function's store replaced a nonzero gradient with another value, discarding
    what earlier adjoints added (`gradient_assigned`).

The replay witness (tinyad/check/replaycheck.py, its copies of the replayed boxes
tinyad/check/readwitness.py) finds where to look and hands the judge the evidence: the values
read (or held before the store) and held now, the element, its read or store. What counts as a
change (`changed`, `assigned`) and what each report says are decided here only.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tinyad.check import rules
from tinyad.check.report import Access

ROUNDING_ULPS = 128


def changed(then, now) -> np.ndarray:
    """Element-wise: does `now` hold another value than `then`? NaN equals NaN, and floats
    within rounding of each other (128 ulps of the largest value of `then`) are equal: a step
    recomputed in the backward pass (DiffTaichi's checkpointing) may sum its parallel atomics
    in another order, and that is not a change."""
    then, now = np.asarray(then), np.asarray(now)
    differ = then != now
    if then.dtype.kind != "f":
        return differ
    differ &= ~(np.isnan(then) & np.isnan(now))
    if not differ.any():
        return differ
    tolerance = ROUNDING_ULPS * np.finfo(then.dtype).eps
    scale = float(np.nanmax(np.abs(then), initial=0.0))
    return ~np.isclose(now, then, rtol=tolerance, atol=tolerance * scale, equal_nan=True)


def differences(then: np.ndarray, now: np.ndarray):
    """The positions (an array of index rows, in order) where `now` holds another value than
    `then` (`changed`), or None: the common answer, nothing changed, in one comparison."""
    if then.shape == now.shape and (then.tobytes() == now.tobytes() or np.array_equal(
            then, now, equal_nan=then.dtype.kind == "f")):
        return None
    where = np.argwhere(changed(then, now))
    return None if where.shape[0] == 0 else where


def assigned(before, now) -> np.ndarray:
    """Element-wise: did a store replace a nonzero gradient with another value?"""
    before = np.asarray(before)
    return (before != 0) & changed(before, now)


def value_at(array, index):
    """One element's value (a list for a vector or matrix element)."""
    value = array[tuple(index)]
    return value.item() if np.ndim(value) == 0 else value.tolist()


def python_overwrite(field: str, element: tuple, read: Access, write: Access, now):
    """A Python-scope `write` inside the Tape left `now` in fld[element], which a launch of the
    Tape read (`read`, with the value it read) for its adjoint: Rule 1, or None where the value
    is the one read."""
    if not changed(read.value, now).any():
        return None
    write.value = now
    return rules.python_overwrite(field=field, element=element, read=read, write=write)


def replay_divergence(kernel: str, field: str, element: tuple, read: Access, now,
                      last_writer: Access | None):
    """The adjoint of `kernel` replays `read` of fld[element] and finds `now` there (the
    latest write that may have left it: `last_writer`), or None where it is the value read."""
    if not changed(read.value, now).any():
        return None
    return rules.replay_divergence(kernel=kernel, field=field, element=element, read=read,
                                   now=now, last_writer=last_writer)


def gradient_assigned(field: str, before, now, write: Access, element=None):
    """A grad_for function's store (`write`, at a box of fld whose first element is `element`)
    left `now` where the gradient held `before` (arrays of the box, or one element's values):
    the error at the first element where it replaced a nonzero gradient, or None."""
    where = np.argwhere(assigned(before, now))
    if where.shape[0] == 0:
        return None
    relative = tuple(int(i) for i in where[0])
    origin = tuple(element or ())
    width = max(len(origin), len(relative))
    at = tuple(a + b for a, b in zip(origin + (0,) * (width - len(origin)),
                                     relative + (0,) * (width - len(relative))))
    return rules.custom_gradient_assigns(
        field=field, element=at, write=dataclasses.replace(write, value=value_at(now, relative)),
        discarded=value_at(before, relative))
