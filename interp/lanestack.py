"""The Save/Restore stacks of lanes (interp/lanes.py): one stack per lane.

Why per lane: under a mask, a `save t` runs for some lanes only. The two sides of an `if` each
save `t` for their own lanes in the same iteration; the adjoint restores them side by side. One
shared stack of whole-lane arrays would hand the `then` side what the `else` side saved (the
last push), a wrong value for every lane of the `then` side, and so a wrong gradient. Here each
lane pushes and pops only its own entries, in its own order, exactly as the scalar path's stack
for that iteration does.
"""
from __future__ import annotations

import numpy as np


class LaneStack:
    """Stacks of values, one per lane, kept as a (depth, lanes) array and each lane's depth."""

    def __init__(self, n: int):
        self.n = n
        self.depth = np.zeros(n, dtype=np.intp)
        self.data: np.ndarray | None = None
        self.undefined = np.zeros((0, n), dtype=bool)   # saved before it was ever assigned

    def _lanes(self, mask):
        return np.arange(self.n) if mask is None else np.flatnonzero(mask)

    def push(self, value, mask) -> None:
        lanes = self._lanes(mask)
        if not lanes.size:
            return
        level = self.depth[lanes]
        top = int(level.max()) + 1
        values = np.zeros(self.n) if value is None else \
            np.broadcast_to(np.asarray(value), (self.n,))
        self._grow(top, values.dtype)
        self.data[level, lanes] = values[lanes]
        self.undefined[level, lanes] = value is None
        self.depth[lanes] = level + 1

    def pop(self, current, mask):
        """-> the value after the restore: each masked lane's saved value, the other lanes'
        `current` (None when every restored lane had saved nothing yet)."""
        lanes = self._lanes(mask)
        if not lanes.size:
            return current
        level = self.depth[lanes] - 1
        self.depth[lanes] = level
        if self.undefined[level, lanes].all() and current is None:
            return None
        base = np.zeros(self.n, self.data.dtype) if current is None else \
            np.array(np.broadcast_to(np.asarray(current), (self.n,)),
                     dtype=np.result_type(self.data.dtype, np.asarray(current).dtype))
        base[lanes] = self.data[level, lanes]
        return base

    def _grow(self, rows: int, dtype) -> None:
        if self.data is None:
            self.data = np.zeros((max(rows, 4), self.n), dtype=dtype)
            self.undefined = np.zeros(self.data.shape, dtype=bool)
            return
        wanted = np.result_type(self.data.dtype, dtype)
        if wanted != self.data.dtype:
            self.data = self.data.astype(wanted)
        if rows > self.data.shape[0]:
            extra = max(rows, 2 * self.data.shape[0]) - self.data.shape[0]
            self.data = np.concatenate([self.data, np.zeros((extra, self.n), self.data.dtype)])
            self.undefined = np.concatenate([self.undefined,
                                             np.zeros((extra, self.n), dtype=bool)])
