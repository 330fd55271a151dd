"""Atomic updates of field elements: `ti.atomic_*(target, value)` and the augmented
assignments Taichi makes atomic (`+=`, `-=`, and on integers `&=`, `|=`, `^=`), traced into
ir.AtomicOp; on a local, the same computed in place."""
from __future__ import annotations

from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core.errors import TinyadSyntaxError, TinyadTypeError
from tinyad.frontend.lang import is_integer
from tinyad.frontend.lvalues import FieldRef
from tinyad.frontend.matrix import Matrix


def trace_atomic_call(tracer, op, node, want_result=True):
    """`ti.atomic_<op>(target, value)`: -> the old value (a Matrix of them for a vector)."""
    if len(node.args) != 2:
        raise TinyadSyntaxError(f"ti.atomic_{op}(target, value) takes two arguments",
                                tracer.loc(node), hint=f"e.g. ti.atomic_{op}(total[None], x[i])")
    lv = tracer.lvalue(node.args[0])
    values = tracer.evaluated_first(tracer.spread(tracer.visit(node.args[1]), lv, node), lv, node)
    olds = []
    for slot, v in zip(lv.slots, values):
        if isinstance(slot, FieldRef):
            if op in ir.BITWISE_ATOMICS and not (slot.field.dtype.is_int and is_integer(v)):
                raise TinyadTypeError(f"ti.atomic_{op[4:]} needs integers: {slot.field.name} "
                                      f"is {slot.field.dtype}", tracer.loc(node),
                                      hint="bitwise operations take integer fields and values")
            old = ir.Var(tracer.namer.fresh("old"), slot.field.dtype, tracer.loc(node))
            tracer.emit(ir.AtomicOp(op, slot.field, slot.indices, B.cast(v, slot.field.dtype),
                                    old.name if want_result else None, tracer.loc(node)))
        else:
            current = tracer.read_slot(slot)
            old = ir.Var(tracer.namer.fresh("old"), current.dtype, tracer.loc(node))
            tracer.emit(ir.Assign(old.name, current, tracer.loc(node)))
            tracer.write_slot(slot, B.binary(op, old, v), node)
        olds.append(old)
    return olds[0] if not lv.shape else Matrix._make(olds, lv.shape[0],
                                                      lv.shape[1] if len(lv.shape) > 1 else 1,
                                                      len(lv.shape))


def atomic_update(name, fld, value) -> bool:
    """Is `fld[...] op= value` one atomic update, as in Taichi? `+=` and `-=`, and on integers
    `&=`, `|=`, `^=` (other operators, and a float operand of a bitwise one, load, compute and
    store: the latter raises the operator's type error there)."""
    if name in ("add", "sub"):
        return True
    return name in ir.BITWISE_ATOMICS and fld.dtype.is_int and is_integer(value)
