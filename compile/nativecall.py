"""What a captured program's compiled function (compile/sequence.py) is made of, so that numba
compiles little for it: its arrays from a block of addresses, kernels called by address, fills.

    a0 = array_at(block, 0, 2, np.float32)      # block[0] its data, block[1:3] its shape
    call_native(block[9], a0, a1, np.int32(t))  # the kernel whose compiled entry is at block[9]
    fill_array(a0, floats[3])

A program that called the kernels' numba functions by name had numba link each kernel's code
into its own and optimise and compile the whole again (mass_spring: 1.5 s for its fwd_bwd
program, as long as its eight kernels took), and its twenty array arguments took numba's Python
wrapper 10 ms each. Here the function is a C callback of three pointers (the block of arrays'
addresses and shapes and kernels' entries, the integers, the floats), the kernels stay where
they were compiled, and each is called through numba's own calling convention for the argument
types it was compiled for (compile/sequence.py checks them against the kernel's signature).
"""
from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.core.errors import RequireLiteralValue
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array


def entry_address(dispatcher) -> int:
    """The address of a kernel's compiled entry (numba's native function, not its Python
    wrapper): what `call_native` calls."""
    (result,) = dispatcher.overloads.values()
    return result.library.get_pointer_to_function(result.fndesc.mangled_name)


def entry_argument_types(dispatcher) -> tuple:
    (signature,) = dispatcher.signatures
    return tuple(signature)


@intrinsic
def call_native(typingctx, address, *args):
    """Call the numba function compiled for exactly these argument types at `address`."""
    argtys = list(args[0].types if isinstance(args[0], types.StarArgTuple) else args)
    signature = types.none(address, types.StarArgTuple.from_types(argtys))

    def codegen(context, builder, sig, llargs):
        fnty = context.call_conv.get_function_type(types.none, argtys)
        callee = builder.inttoptr(llargs[0], fnty.as_pointer())
        values = cgutils.unpack_tuple(builder, llargs[1])
        status, _ = context.call_conv.call_function(builder, callee, types.none, argtys, values)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()
    return signature, codegen


@intrinsic
def array_at(typingctx, block, slot, ndim, dtype):
    """The C-contiguous array whose data address is block[slot] and shape block[slot + 1:]
    (`slot`, `ndim`: literal integers; `dtype`: a numpy scalar type)."""
    if not isinstance(slot, types.IntegerLiteral) or not isinstance(ndim, types.IntegerLiteral):
        raise RequireLiteralValue("array_at's slot and ndim are literal")
    arrty = types.Array(dtype.instance_type, ndim.literal_value, "C")
    first = slot.literal_value

    def codegen(context, builder, sig, llargs):
        words = llargs[0]
        intp = context.get_value_type(types.intp)

        def word(k):
            return builder.load(builder.gep(words, [intp(first + k)]))
        shape = [word(1 + k) for k in range(arrty.ndim)]
        itemsize = context.get_abi_sizeof(context.get_data_type(arrty.dtype))
        strides, stride = [], intp(itemsize)
        for extent in reversed(shape):
            strides.insert(0, stride)
            stride = builder.mul(stride, extent)
        data_type = context.get_data_type(arrty.dtype).as_pointer()
        array = context.make_array(arrty)(context, builder)
        populate_array(array, data=builder.inttoptr(word(0), data_type), shape=shape,
                       strides=strides, itemsize=intp(itemsize), meminfo=None)
        return array._getvalue()
    return arrty(block, slot, ndim, dtype), codegen


@intrinsic
def fill_array(typingctx, array, value):
    """Every element of a C-contiguous array set to `value` (converted to its dtype)."""
    def codegen(context, builder, sig, llargs):
        arrty = sig.args[0]
        array = context.make_array(arrty)(context, builder, llargs[0])
        stored = context.cast(builder, llargs[1], sig.args[1], arrty.dtype)
        stored = context.get_value_as_data(builder, arrty.dtype, stored)
        with cgutils.for_range(builder, array.nitems) as loop:
            builder.store(stored, builder.gep(array.data, [loop.index]))
        return context.get_dummy_value()
    return types.none(array, value), codegen


@intrinsic
def store_flat(typingctx, array, index, value):
    """array.flat[index] = value, for a C-contiguous array (no bounds check: the index is the
    capture's, of an element that was written)."""
    def codegen(context, builder, sig, llargs):
        arrty = sig.args[0]
        array = context.make_array(arrty)(context, builder, llargs[0])
        stored = context.cast(builder, llargs[2], sig.args[2], arrty.dtype)
        stored = context.get_value_as_data(builder, arrty.dtype, stored)
        builder.store(stored, builder.gep(array.data, [llargs[1]]))
        return context.get_dummy_value()
    return types.none(array, index, value), codegen
