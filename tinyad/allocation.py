"""A field's shape, checked, and its zeroed array, checked against the machine's memory first."""
from __future__ import annotations

import os

import numpy as np

from tinyad.core.errors import TinyadRuntimeError, TinyadTypeError


def normalize_shape(shape) -> tuple[int, ...] | None:
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    if any(s <= 0 for s in shape):   # Taichi: every dimension of a field must be positive
        raise TinyadTypeError(f"field shape {shape} has a {'zero' if 0 in shape else 'negative'} "
                              "extent: every dimension of a field must be at least 1",
                              hint="use shape=() for a single value" if 0 in shape else
                              "extents count elements: use positive numbers")
    return shape


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):   # not a POSIX system: no check
        return None


def _bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} bytes"


def allocate(fld, shape: tuple) -> np.ndarray:
    """The zeroed array of `fld`, after checking that it can fit in memory at all: a field too
    big gets a clear error with its size before anything is allocated."""
    full = shape + fld.element_shape
    size = int(np.prod(full, dtype=object)) * fld.dtype.np().itemsize
    memory = _physical_memory()
    if memory is not None and size > memory:
        raise TinyadRuntimeError(f"field {fld.name} of shape {shape} ({fld.dtype}) needs "
                                 f"{_bytes(size)}, more than this machine's memory "
                                 f"({_bytes(memory)})", hint="make the field smaller")
    try:
        return np.zeros(full, dtype=fld.dtype.np)
    except MemoryError:
        raise TinyadRuntimeError(f"field {fld.name} of shape {shape} ({fld.dtype}) needs "
                                 f"{_bytes(size)}, which could not be allocated",
                                 hint="make the field smaller, or free memory") from None
