"""Frontend: Taichi's Matrix.fill in a kernel, `x[i].fill(0.0)` of a field's vector element or
`v.fill(0.0)` of a vector or matrix local: every entry set to one number, as `x[i] = 0.0` does."""
from __future__ import annotations

import ast

from tinyad.core.errors import TinyadTypeError
from tinyad.frontend.matrix import Matrix
from tinyad.frontend.scope import LocalMatrix
from tinyad.frontend.structlvalues import StructLValue


def fills_a_matrix(tracer, call) -> bool:
    """Is `call` a fill of something assignable? (`fields[0].fill(3.0)`, a field reached
    through a Python list, is the field's own fill.)"""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "fill"):
        return False
    target = func.value
    if isinstance(target, ast.Subscript):
        base = target.value
        return not isinstance(base, (ast.Name, ast.Attribute)) or \
            not isinstance(tracer.visit(base), (list, tuple, dict))   # (a name: no IR made)
    return isinstance(target, ast.Name) and isinstance(
        tracer.frame.lookup(target.id, tracer.loc(target)), LocalMatrix)


def trace_fill(tracer, call) -> None:
    target = tracer.lvalue(call.func.value)
    if isinstance(target, StructLValue) or not target.shape:
        raise TinyadTypeError("fill() fills a vector or a matrix", tracer.loc(call),
                              hint="assign the value instead: x[i] = 0.0")
    given = [*call.args, *(k.value for k in call.keywords if k.arg == "val")]
    if len(given) != 1 or len(given) != len(call.args) + len(call.keywords):
        raise TinyadTypeError("fill() takes one value", tracer.loc(call))
    value = tracer.visit(given[0])
    if isinstance(value, Matrix):
        raise TinyadTypeError("fill() takes a number, not a vector or matrix",
                              tracer.loc(given[0]), hint="assign the vector: x[i] = v")
    tracer.assign(target, value, call)
