"""Four iterations' float arithmetic at once, for generated CPU code (compile/laneloops.py).

    t = vsqrt(vadd(vmul(r, r), _f32_0p001))     # r: a tuple of 4 float32, or one float32

Each op takes tuples of floats, all of one length (a scalar operand is the same in every lane),
and gives a tuple, computed as one LLVM vector op (`fdiv <4 x float>`, `llvm.sqrt.v4f32`). The lanes are
rounded as the scalar ops round them (IEEE: every lane of a vector divide or square root is
correctly rounded, and no fast-math flag is set), so the values are the scalar code's to the
bit. Why: numba leaves the SLP vectorizer off (numba#8705, miscompilations) and LLVM unrolls a
short loop fully before its loop vectorizer sees it, so a small kernel's divisions and square
roots ran one at a time, on a divider that does four f32 lanes in the time of one.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _element(ty):
    return ty.dtype if isinstance(ty, types.BaseTuple) else ty


def _to_vector(context, builder, ty, value, count: int):
    """A tuple of `count` floats, or one float in every lane, as an LLVM vector."""
    scalar = context.get_value_type(_element(ty))
    vector = ir.Constant(ir.VectorType(scalar, count), ir.Undefined)
    for k in range(count):
        item = builder.extract_value(value, k) if isinstance(ty, types.BaseTuple) else value
        vector = builder.insert_element(vector, item, ir.Constant(ir.IntType(32), k))
    return vector


def _to_tuple(context, builder, tuple_type, vector):
    out = ir.Constant(context.get_value_type(tuple_type), ir.Undefined)
    for k in range(tuple_type.count):
        item = builder.extract_element(vector, ir.Constant(ir.IntType(32), k))
        out = builder.insert_value(out, item, k)
    return out


def _lanes_of(*operands):
    """The tuple type of an op on these operands (at least one a tuple of floats, all tuples
    of one length and every operand of one float type), or None."""
    tuples = [t for t in operands if isinstance(t, types.UniTuple)]
    if not tuples or any(not isinstance(t.dtype, types.Float) for t in tuples) or \
            len({t.count for t in tuples}) != 1:
        return None
    dtype = tuples[0].dtype
    if any(_element(t) != dtype for t in operands):
        return None
    return types.UniTuple(dtype, tuples[0].count)


def _binary(instruction: str):
    def typer(typingctx, a, b):
        result = _lanes_of(a, b)
        if result is None:
            return None

        def codegen(context, builder, sig, args):
            n = sig.return_type.count
            left = _to_vector(context, builder, sig.args[0], args[0], n)
            right = _to_vector(context, builder, sig.args[1], args[1], n)
            value = getattr(builder, instruction)(left, right)
            return _to_tuple(context, builder, sig.return_type, value)
        return result(a, b), codegen
    return intrinsic(typer)


vadd = _binary("fadd")
vsub = _binary("fsub")
vmul = _binary("fmul")
vdiv = _binary("fdiv")


@intrinsic
def vneg(typingctx, a):
    if _lanes_of(a) is None:
        return None

    def codegen(context, builder, sig, args):
        value = _to_vector(context, builder, sig.args[0], args[0], sig.return_type.count)
        return _to_tuple(context, builder, sig.return_type, builder.fneg(value))
    return a(a), codegen


@intrinsic
def vsqrt(typingctx, a):
    if _lanes_of(a) is None:
        return None

    def codegen(context, builder, sig, args):
        n = sig.return_type.count
        value = _to_vector(context, builder, sig.args[0], args[0], n)
        bits = 32 if isinstance(value.type.element, ir.FloatType) else 64
        sqrt = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
            value.type, [value.type]), f"llvm.sqrt.v{n}f{bits}")
        return _to_tuple(context, builder, sig.return_type, builder.call(sqrt, [value]))
    return a(a), codegen


# The IR ops these spell, by name (compile/laneloops.py)
OPS = {"add": "vadd", "sub": "vsub", "mul": "vmul", "truediv": "vdiv", "neg": "vneg",
       "sqrt": "vsqrt"}
