"""What a captured program's compiled function (compile/sequence.py) is made of, so that numba
compiles little for it: kernels called by address, with their arrays read from a block of
addresses and shapes, and fills and stores.

    call_at(block, 9, "0:float32:2 3:float32:1 int32", t)  # the kernel whose entry is block[9];
        # its arguments: the 2-d float32 array at block[0] (data) and block[1:3] (shape), the
        # 1-d one at block[3:5], and t as an int32
    zero_at(block, 0, 2, np.float32)                         # a fill with 0
    fill_at(block, 3, 1, np.float32, floats[2])              # any other fill
    if first_int_at(block, 5) != 0: ...                       # a kernel's bad-index flag

A program that called the kernels' numba functions by name had numba link each kernel's code
into its own and optimise and compile the whole again (mass_spring: 1.5 s for its fwd_bwd
program, as long as its eight kernels took), and its twenty array arguments took numba's Python
wrapper 10 ms each. Here the function is a C callback of three pointers (the block of arrays'
addresses and shapes and kernels' entries, the integers, the floats), the kernels stay where
they were compiled, and each is called through numba's own calling convention for the argument
types it was compiled for (compile/sequence.py checks them against the kernel's signature).

Numba types and lowers every call in the function in Python, milliseconds apiece, and LLVM
vectorises every loop it is given. So a launch is one call (its arrays are no values of the
function, its scalars are converted inside it), and a fill with zero is a memset, not a loop.
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import RequireLiteralValue
from numba.extending import intrinsic


def entry_address(dispatcher) -> int:
    """The address of a kernel's compiled entry (numba's native function, not its Python
    wrapper): what `call_at` calls."""
    (result,) = dispatcher.overloads.values()
    return result.library.get_pointer_to_function(result.fndesc.mangled_name)


def entry_argument_types(dispatcher) -> tuple:
    (signature,) = dispatcher.signatures
    return tuple(signature)


def block_arguments(layout: str) -> list:
    """call_at's layout, parsed: a kernel's arguments in order, each (first word, numba array
    type) for an array of the block or (None, numba scalar type) for the next scalar given.
    "12:float32:2" is the 2-d float32 array at words 12 (data) and 13-14 (shape); "int32" a
    scalar passed as an int32."""
    found = []
    for part in layout.split():
        if ":" not in part:
            found.append((None, numba.from_dtype(np.dtype(part))))
            continue
        first, dtype, ndim = part.split(":")
        found.append((int(first), types.Array(numba.from_dtype(np.dtype(dtype)), int(ndim), "C")))
    return found


def _literal(*args) -> None:
    if not all(isinstance(a, types.Literal) for a in args):
        raise RequireLiteralValue("the block's word numbers, ranks and layouts are literal")


INTP = ir.IntType(64)       # (numba's intp on the 64-bit hosts fast mode runs on)


def _word(builder, words, k: int):
    return builder.load(builder.gep(words, [INTP(k)]))


def _itemsize(dtype) -> int:
    """Bytes per element (numpy's answer: numba's asks LLVM, a millisecond a question)."""
    return np.dtype(str(dtype)).itemsize


def _shape(builder, words, first: int, ndim: int) -> list:
    return [_word(builder, words, first + 1 + k) for k in range(ndim)]


def _array_value(context, builder, words, first: int, arrty):
    """The C-contiguous array of type `arrty` whose data address is words[first] and shape
    words[first + 1:], as numba's array struct, built member by member (numba's array proxy
    goes through the stack: more to compile), with no reference count: the block's owner
    holds the array."""
    shape = _shape(builder, words, first, arrty.ndim)
    itemsize = _itemsize(arrty.dtype)
    strides, stride = [], INTP(itemsize)
    for extent in reversed(shape):
        strides.insert(0, stride)
        stride = builder.mul(stride, extent)
    struct = context.get_value_type(arrty)
    value = ir.Constant(struct, None)
    data = builder.inttoptr(_word(builder, words, first), struct.elements[4])
    nitems = builder.udiv(stride, INTP(itemsize))
    for k, member in ((2, nitems), (3, INTP(itemsize)), (4, data)):
        value = builder.insert_value(value, member, k)
    for k, (extent, step) in enumerate(zip(shape, strides)):
        value = builder.insert_value(value, extent, [5, k])
        value = builder.insert_value(value, step, [6, k])
    return value


@intrinsic
def array_at(typingctx, block, slot, ndim, dtype):
    """The C-contiguous array whose data address is block[slot] and shape block[slot + 1:]
    (`slot`, `ndim`: literal integers; `dtype`: a numpy scalar type)."""
    _literal(slot, ndim)
    arrty = types.Array(dtype.instance_type, ndim.literal_value, "C")

    def codegen(context, builder, sig, llargs):
        return _array_value(context, builder, llargs[0], slot.literal_value, arrty)
    return arrty(block, slot, ndim, dtype), codegen


@intrinsic
def call_at(typingctx, block, entry, layout, *scalars):
    """Call the kernel whose compiled entry is at block[entry] with the arguments `layout`
    names (block_arguments: arrays read from the block, and `scalars` converted to the types
    it says); `entry` and `layout` are literals."""
    _literal(entry, layout)
    given = list(scalars[0].types if scalars and isinstance(scalars[0], types.StarArgTuple)
                 else scalars)
    arguments = block_arguments(layout.literal_value)
    argtys = [argty for _, argty in arguments]

    def codegen(context, builder, sig, llargs):
        words = llargs[0]
        fnty = context.call_conv.get_function_type(types.none, argtys)
        callee = builder.inttoptr(_word(builder, words, entry.literal_value),
                                  fnty.as_pointer())
        passed = iter(zip(cgutils.unpack_tuple(builder, llargs[3]) if given else (), given))
        values = []
        for first, argty in arguments:
            if first is None:
                value, value_type = next(passed)
                values.append(context.cast(builder, value, value_type, argty))
            else:
                values.append(_array_value(context, builder, words, first, argty))
        status, _ = context.call_conv.call_function(builder, callee, types.none, argtys, values)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()
    return types.none(block, entry, layout, types.StarArgTuple.from_types(given)), codegen


@intrinsic
def first_int_at(typingctx, block, slot):
    """The first element of the int64 array whose data address is block[slot] (a kernel's
    bad-index flag), read without making the array."""
    _literal(slot)

    def codegen(context, builder, sig, llargs):
        address = _word(builder, llargs[0], slot.literal_value)
        return builder.load(builder.inttoptr(address, INTP.as_pointer()))
    return types.int64(block, slot), codegen


def _data_and_count(context, builder, words, first: int, ndim: int, element):
    """(data pointer, number of elements) of the array at words[first:]."""
    count = INTP(1)
    for extent in _shape(builder, words, first, ndim):
        count = builder.mul(count, extent)
    data_type = context.get_data_type(element).as_pointer()
    return builder.inttoptr(_word(builder, words, first), data_type), count


@intrinsic
def zero_at(typingctx, block, slot, ndim, dtype):
    """Every byte of the array at block[slot:] (as array_at reads it) set to zero."""
    _literal(slot, ndim)
    element = dtype.instance_type

    def codegen(context, builder, sig, llargs):
        data, count = _data_and_count(context, builder, llargs[0], slot.literal_value,
                                      ndim.literal_value, element)
        size = builder.mul(count, INTP(_itemsize(element)))
        cgutils.memset(builder, data, size, 0)
        return context.get_dummy_value()
    return types.none(block, slot, ndim, dtype), codegen


@intrinsic
def fill_at(typingctx, block, slot, ndim, dtype, value):
    """Every element of the array at block[slot:] (as array_at reads it) set to `value`,
    converted to its dtype."""
    _literal(slot, ndim)
    element = dtype.instance_type

    def codegen(context, builder, sig, llargs):
        data, count = _data_and_count(context, builder, llargs[0], slot.literal_value,
                                      ndim.literal_value, element)
        stored = context.cast(builder, llargs[4], sig.args[4], element)
        stored = context.get_value_as_data(builder, element, stored)
        with cgutils.for_range(builder, count) as loop:
            builder.store(stored, builder.gep(data, [loop.index]))
        return context.get_dummy_value()
    return types.none(block, slot, ndim, dtype, value), codegen


@intrinsic
def store_at(typingctx, block, slot, dtype, index, value):
    """The flat element `index` of the array whose data address is block[slot] set to `value`
    (no bounds check: the index is the capture's, of an element that was written)."""
    _literal(slot)
    element = dtype.instance_type

    def codegen(context, builder, sig, llargs):
        address = _word(builder, llargs[0], slot.literal_value)
        data = builder.inttoptr(address, context.get_data_type(element).as_pointer())
        stored = context.cast(builder, llargs[4], sig.args[4], element)
        stored = context.get_value_as_data(builder, element, stored)
        builder.store(stored, builder.gep(data, [llargs[3]]))
        return context.get_dummy_value()
    return types.none(block, slot, dtype, index, value), codegen
