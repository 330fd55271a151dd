"""Fast mode's look for a NaN or an infinity in a small float array: the check after each
adjoint launch (tinyad/check/nonfinite.py asks the backend's `all_finite`).

A compiled loop, called through numba's dispatcher as the kernels are: inside a checked step
that path is warm, where numpy's ravel/tolist/isfinite are not. For a gradient of a few floats
those numpy calls cost more than the look itself (gravity at N=8: about 10 of a step's 180 us,
benchmarks/side_by_side.py), the loop well under one.
"""
from __future__ import annotations

import math

from numba import njit


@njit(cache=True, nogil=True)
def all_finite(values) -> bool:
    """Is every value of `values` (a float32 or float64 array, any shape) finite?"""
    for value in values.flat:
        if not math.isfinite(value):
            return False
    return True
