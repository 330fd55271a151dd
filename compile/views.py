"""Array views for generated CPU code, made without a call into numba's runtime.

    _U = one_element(U)      # a 0-d field's array as a 1-element C array, the same memory

`U.reshape(1)` did the same through `numba_attempt_nocopy_reshape` and the runtime's reference
counting: about 60 instructions a launch, as much as eight of gravity's pairs cost, in a
captured program that launches two such kernels a step. The view holds no reference (its
meminfo is null): it lives only while the kernel runs, inside the call that holds the array.
"""
from __future__ import annotations

from numba import types
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array


@intrinsic
def one_element(typingctx, array):
    """The 0-d C array `array` as a 1-d C array of one element."""
    if not isinstance(array, types.Array) or array.ndim != 0:
        return None
    view = types.Array(array.dtype, 1, "C")

    def codegen(context, builder, sig, args):
        source = context.make_array(sig.args[0])(context, builder, args[0])
        intp = context.get_value_type(types.intp)
        itemsize = context.get_abi_sizeof(context.get_data_type(view.dtype))
        out = context.make_array(view)(context, builder)
        populate_array(out, data=source.data, shape=[intp(1)], strides=[intp(itemsize)],
                       itemsize=intp(itemsize), meminfo=None)
        return out._getvalue()
    return view(array), codegen
