"""Taichi's ti.algorithms: an inclusive prefix sum and a sort of fields, called from Python.

Taichi runs them as GPU-style kernels (its prefix sum on CUDA and Vulkan only). Here they are
numpy over the fields' values, on every backend, and the rule checks see Python-scope writes."""
from __future__ import annotations

import numpy as np

from tinyad.core import types as T
from tinyad.core.errors import TinyadRuntimeError, TinyadTypeError
from tinyad.core.srcloc import user_loc


class PrefixSumExecutor:
    """`PrefixSumExecutor(n).run(x)`: x[0..n) becomes its inclusive prefix sum, in place."""

    def __init__(self, length: int):
        self.sorting_length = int(length)     # (Taichi's name for it)

    def run(self, input_arr) -> None:
        if input_arr.dtype != T.i32:
            raise TinyadRuntimeError("Only ti.i32 type is supported for prefix sum.", user_loc(),
                                     hint=f"{input_arr.name} is {input_arr.dtype}: scan an "
                                          "i32 field")
        values = input_arr.to_numpy()
        n = self.sorting_length
        values[:n] = np.cumsum(values[:n], dtype=np.int32)    # (wrapping as i32 adds do)
        input_arr.from_numpy(values)


def parallel_sort(keys, values=None) -> None:
    """Sort the 1-D field `keys` ascending, in place; `values`, as long, moves with them."""
    if len(keys.shape) != 1 or keys.element_shape or (
            values is not None and values.shape[:1] != keys.shape):
        given = "" if values is None else f" and values of shape {values.shape}"
        raise TinyadTypeError(f"parallel_sort sorts a 1-D field of numbers; got keys of shape "
                              f"{keys.shape + keys.element_shape}{given}", user_loc(),
                              hint="values, if given, has one entry per key")
    order = np.argsort(keys.to_numpy(), kind="stable")
    keys.from_numpy(keys.to_numpy()[order])
    if values is not None:
        values.from_numpy(values.to_numpy()[order])
