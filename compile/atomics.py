"""Atomic read-modify-write on numpy array elements for numba's CPU target.

numba has no CPU atomics on array elements, so these are LLVM `atomicrmw` instructions emitted
through `numba.extending.intrinsic`. They work in serial and `prange` code and with `cache=True`.
Each returns the element's **old** value (Taichi's `ti.atomic_add` returns it too).

    atomic_add(arr, (i, j), v)      # any ndim, index a tuple of integers (() for a 0-d array)
    atomic_add(arr, i, v)           # 1-d arrays: a plain integer index

The value is converted to the array's dtype first (ints wrap, as a store would).
Relaxed ("monotonic") ordering: the kernels only need each update to be indivisible.
Float min/max use LLVM's `fmin`/`fmax` (C's fminf: a NaN operand is ignored), as the op
does everywhere (tinyad/core/ops.py, as in Taichi); integers are exact.

The generated kernels only call these in a parallel loop: serial code uses plain `+=`, which is
about 4 times cheaper (notes/numba.md section 2).
"""
from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _index_types(arr, idx):
    """The integer types of an index, or None when `idx` cannot index `arr`."""
    if isinstance(idx, types.Integer):
        return [idx] if arr.ndim == 1 else None
    if isinstance(idx, types.BaseTuple) and len(idx) == arr.ndim:
        if all(isinstance(t, types.Integer) for t in idx):
            return list(idx)
    return None


def _make(name, float_op, signed_op, unsigned_op):
    def typer(typingctx, arr, idx, val):
        if not isinstance(arr, types.Array) or _index_types(arr, idx) is None:
            return None
        if not isinstance(val, (types.Integer, types.Float, types.Boolean)):
            return None
        dtype = arr.dtype
        if isinstance(dtype, types.Float):
            if float_op is None:
                return None
            op = float_op
        elif isinstance(dtype, types.Integer):
            op = signed_op if dtype.signed else unsigned_op
        else:
            return None

        def codegen(context, builder, sig, args):
            arr_t, idx_t, val_t = sig.args
            arr_v, idx_v, val_v = args
            array = context.make_array(arr_t)(context, builder, arr_v)
            if isinstance(idx_t, types.Integer):
                indices, index_types = [idx_v], [idx_t]
            else:
                indices = cgutils.unpack_tuple(builder, idx_v, len(idx_t))
                index_types = list(idx_t.types) if len(idx_t) else []
            indices = [context.cast(builder, i, t, types.intp)
                       for i, t in zip(indices, index_types)]
            # boundscheck=True: checked when the kernel is compiled with boundscheck=True
            ptr = cgutils.get_item_pointer(context, builder, arr_t, array, indices,
                                           wraparound=False, boundscheck=True)
            value = context.cast(builder, val_v, val_t, arr_t.dtype)
            return builder.atomic_rmw(op, ptr, value, "monotonic")

        return dtype(arr, idx, val), codegen

    typer.__name__ = name
    return intrinsic(typer)


atomic_add = _make("atomic_add", "fadd", "add", "add")
atomic_sub = _make("atomic_sub", "fsub", "sub", "sub")
atomic_max = _make("atomic_max", "fmax", "max", "umax")   # float fmax needs LLVM >= 15
atomic_min = _make("atomic_min", "fmin", "min", "umin")
atomic_bit_and = _make("atomic_bit_and", None, "and", "and")    # (integers only)
atomic_bit_or = _make("atomic_bit_or", None, "or", "or")
atomic_bit_xor = _make("atomic_bit_xor", None, "xor", "xor")
