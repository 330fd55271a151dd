"""Central finite differences in f64: the independent truth gradient tests compare against."""
from __future__ import annotations

import numpy as np


def finite_difference(run_loss, field, eps=1e-6):
    """d(loss)/d(field) by central differences; `run_loss()` recomputes and returns the loss."""
    base = field.to_numpy().astype(np.float64)
    grad = np.zeros_like(base)
    for index in np.ndindex(base.shape):
        for sign in (1, -1):
            shifted = base.copy()
            shifted[index] += sign * eps
            field.from_numpy(shifted.astype(field.dtype.np))
            grad[index] += sign * run_loss() / (2 * eps)
    field.from_numpy(base.astype(field.dtype.np))
    return grad
