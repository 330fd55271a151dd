"""Global memory as the interpreter sees it: every access bounds-checked, with hooks that the
access log (a subclass) uses to record each read, store and atomic."""
from __future__ import annotations

import numpy as np

from tinyad.errors import TinyadIndexError


def _out_of_bounds(field, index, loc):
    ndim = len(field.shape)
    user, component = index[:ndim], index[ndim:]
    where = f"index {tuple(int(i) for i in user)}"
    if component:
        where += f" (component {tuple(int(c) for c in component)})"
    return TinyadIndexError(f"{where} is out of bounds for field {field.name} of shape "
                            f"{field.shape}" + (f" with {field.element_shape} elements"
                                                if field.element_shape else ""), loc)


class Memory:
    """Plain memory: numpy arrays, checked indices."""

    def check(self, field, index, loc):
        shape = field.data.shape
        for k, extent in zip(index, shape):
            if not 0 <= k < extent:
                raise _out_of_bounds(field, index, loc)

    def load(self, field, index, loc):
        self.check(field, index, loc)
        return field.data[index]

    def store(self, field, index, value, loc):
        self.check(field, index, loc)
        field.data[index] = value

    def atomic(self, op, field, index, value, loc):
        """Apply `op` in place; returns the old value, as ti.atomic_* do."""
        self.check(field, index, loc)
        data = field.data
        old = data[index]
        if op == "add":
            data[index] = old + value
        elif op == "sub":
            data[index] = old - value
        elif op == "min":
            data[index] = np.minimum(old, value)
        else:
            data[index] = np.maximum(old, value)
        return old

    def begin_iteration(self, loop, index):
        """A new iteration of a parallel loop starts (the access log keys accesses by it)."""
