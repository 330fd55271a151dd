"""The values of a parameter at which a gradient was taken, copied box by box.

The launch checks (tinyad/check/launches.py) keep, for each gradient, its primal's values when
an adjoint last added to it, and compare them before the next manual sweep adds more: a
gradient taken at two points is reported. Those values are copied just before the primal is
next written. The checker knows the boxes each launch writes, so instead of the whole field it
copies only those boxes, each the first time it is written: a recomputing backward pass that
rewrites one row of a time-indexed field per step copies that row, not the field every step.

Sound because every write is announced first: a launch's boxes are saved before it runs, and a
write whose boxes are not known (Python scope, a tangent launch) completes the copy before it
happens. Elements outside the saved boxes still hold the point's values.
"""
from __future__ import annotations

import numpy as np


class PartialPoint:
    """One primal's values at a gradient point: valid on `saved` boxes, and on every element
    not written since (those hold them still), until `complete`."""

    __slots__ = ("values", "saved", "complete")

    def __init__(self, current: np.ndarray):
        self.values = np.empty_like(current)    # (pages never written cost nothing)
        self.saved: set = set()
        self.complete = False

    def restart(self) -> None:
        """Hold a new point of the same primal, taken now, in the same buffer: the field
        holds all of it until written (a recomputing sweep takes a point a step, and a new
        buffer's first touch of each page costs more than the row it saves)."""
        self.saved = set()
        self.complete = False

    def save(self, box: tuple, current: np.ndarray) -> None:
        """`box` of the primal is about to be written: keep what it holds now."""
        if box in self.saved:
            return
        part = tuple(slice(lo, hi) for lo, hi in box)
        self.values[part] = current[part]
        self.saved.add(box)

    def fill(self, current: np.ndarray) -> None:
        """An unknown part is about to be written: copy the rest of the field as it is now."""
        full = current.copy()
        for box in self.saved:
            part = tuple(slice(lo, hi) for lo, hi in box)
            full[part] = self.values[part]
        self.values[...] = full
        self.complete = True

    def unchanged(self, current: np.ndarray) -> bool:
        """Does the primal hold the point's values still? Only the saved boxes can differ."""
        for box in self.saved:
            part = tuple(slice(lo, hi) for lo, hi in box)
            now, then = current[part], self.values[part]
            # (equal bytes first: a memcmp, where equal_nan's compare takes 5-10x longer)
            if now.tobytes() != then.tobytes() and not np.array_equal(now, then, equal_nan=True):
                return False
        return True


SMALL_FIELD = 4096    # values: a gradient point of a field this small is copied whole at once


class PointCopies:
    """The checker's gradient points, box by box (a mixin before LaunchChecker, whose
    grad_point and uncopied_points it fills; `host` gives a field's current array)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.partial_points: dict = {}   # primal -> PartialPoint of its gradient's point

    def before_kernel_write(self, plan) -> None:
        """A launch will write the boxes `plan.writes`: the gradient points of their fields
        keep those boxes first. (One function: tinyad/checkwatch.py knows its reads.)"""
        uncopied, points = self.uncopied_points, self.partial_points
        for written in plan.writes:
            fld = written.site.field
            # (most launches write no field whose point waits for its copy, and no field
            # holds a partial point: no look then)
            grads = uncopied.pop(fld, None) if uncopied else None
            if grads:
                current = self.host(fld)
                if current.size <= SMALL_FIELD:      # a small field: all of it, at once
                    values = current.copy()
                    points.pop(fld, None)
                else:
                    # (a primal's one gradient held the last point: it moves on to this one)
                    point = points.get(fld)
                    if point is None:
                        point = points[fld] = PartialPoint(current)
                    else:
                        point.restart()
                    values = point.values
                for grad in grads:
                    held = self.grad_point.get(grad)
                    if held is not None and held[0] is None:
                        self.grad_point[grad] = (values, held[1], held[2])
            if points:
                point = points.get(fld)
                if point is not None:
                    point.save(written.box, self.host(fld))

    def gradients_cleared(self, grads, time: int, fields_set=()) -> None:
        super().gradients_cleared(grads, time, fields_set)
        if self.partial_points:       # (none, mostly: a Tape clears every gradient)
            for grad in grads:
                if grad not in self.grad_point:
                    self.partial_points.pop(grad.primal, None)

    def before_write(self, fld) -> None:
        """Before a write whose boxes are not known: the point's copy is completed first."""
        point = self.partial_points.pop(fld, None)
        if point is not None:
            point.fill(self.host(fld))
        super().before_write(fld)

    def unchanged_since(self, primal, values, since) -> bool:
        point = self.partial_points.get(primal)
        if point is not None and point.values is values and not point.complete:
            return point.unchanged(self.host(primal))
        return super().unchanged_since(primal, values, since)
