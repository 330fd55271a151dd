"""A float64 value domain and a private memory: the interpreter as a finite-difference oracle.

Why: finite differences of an f32 program computed in f32 drown in rounding (a step of 1e-4
changes the loss in its 4th digit at best). Running the same IR with every float widened to f64,
on private copies of the fields, gives a difference quotient that is accurate to ~1e-9 and
never touches the user's fields, however many times it runs.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from tinyad.core import ir
from tinyad.core import types as T
from tinyad.interp.domain import NumericDomain
from tinyad.interp.memory import Memory


def _wide(node):
    """The node with a float dtype widened to f64 (integer nodes are left as they are)."""
    return dataclasses.replace(node, dtype=T.f64) if node.dtype.is_float else node


class F64Domain(NumericDomain):
    """NumericDomain, but every float value is an np.float64 whatever its declared type."""

    def const(self, e: ir.Const):
        return super().const(_wide(e))

    def op(self, e: ir.Op, args):
        return super().op(_wide(e), args)

    def argument(self, arg: ir.Arg, value):
        return np.float64(value) if arg.dtype.is_float else arg.dtype.np(value)


class ShadowMemory(Memory):
    """Memory over private arrays: floats as f64 copies of the fields' data (or of `values`),
    made on first access. Stores and atomics change only the copies."""

    def __init__(self, values: dict | None = None):
        self.values = {id(f): a for f, a in (values or {}).items()}
        self.arrays: dict[int, np.ndarray] = {}

    def array(self, field) -> np.ndarray:
        key = id(field)
        if key not in self.arrays:
            source = np.asarray(self.values.get(key, field.data))
            wide = np.float64 if field.dtype.is_float else field.dtype.np
            self.arrays[key] = source.astype(wide, copy=True)
        return self.arrays[key]
