"""Frontend: assignment targets. The tracer turns the left side of `=`, `+=` or a `return`
binding into an LValue: the scalar slots it writes (kernel locals or field elements), row-major,
with the shape of the value they hold."""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core.errors import TinyadTypeError
from tinyad.frontend.matrix import index_tuple


@dataclass
class LocalRef:
    var: ir.Var


@dataclass
class FieldRef:
    field: object          # a field (ir.is_field)
    indices: tuple


@dataclass
class LValue:
    """Something assignable: scalar slots, row-major, with the shape of the value they hold."""
    slots: list
    shape: tuple

    def pick(self, key, loc):
        key = index_tuple(key)
        if len(self.shape) == 1 and len(key) == 1:
            flat = key[0]
            width = self.shape[0]
        elif len(self.shape) == 2 and len(key) == 2:
            flat = B.binary("add", B.binary("mul", key[0], self.shape[1]), key[1])
            width = self.shape[0] * self.shape[1]
        elif len(self.shape) == 2 and len(key) == 1 and not B.is_expr(key[0]):
            m = self.shape[1]
            return LValue(self.slots[int(key[0]) * m:(int(key[0]) + 1) * m], (m,))
        else:
            raise TinyadTypeError(f"cannot index a value of shape {self.shape} with {key}", loc)
        if B.is_expr(flat):
            slot = DynamicSlot(flat, self.slots)
            return LValue([one_element(slot) or slot], ())
        if not 0 <= int(flat) < width:
            raise TinyadTypeError(f"index {key} is out of range for shape {self.shape}", loc,
                                  hint=f"indices run from 0 to {width - 1}")
        return LValue([self.slots[int(flat)]], ())


@dataclass
class DynamicSlot:
    """slots[index] with index known only at run time (a vector local indexed by a variable)."""
    index: ir.Expr
    slots: list


def one_element(slot):
    """A component picked at run time from the components of one field element (`m[i][k, l]`):
    one FieldRef whose component indices are computed from the pick, as Taichi addresses it, so
    that the access touches that component only (a select over every component reads and writes
    them all, a race between iterations that write different components). None otherwise."""
    refs = slot.slots
    if not refs or not all(isinstance(r, FieldRef) and r.field is refs[0].field for r in refs):
        return None
    shape = tuple(getattr(refs[0].field, "element_shape", ()) or ())
    n = len(shape)
    if not n or len(refs) != int(np.prod(shape)) or any(
            r.indices[:-n] != refs[0].indices[:-n]
            or tuple(int(c) if isinstance(c, numbers.Integral) else getattr(c, "value", None)
                     for c in r.indices[-n:]) != tuple(np.unravel_index(k, shape))
            for k, r in enumerate(refs)):
        return None
    flat = slot.index
    comps = (flat,) if n == 1 else (B.binary("floordiv", flat, shape[1]),
                                    B.binary("mod", flat, shape[1]))
    return FieldRef(refs[0].field, refs[0].indices[:-n] + comps)
