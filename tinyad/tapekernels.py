"""The kernels Taichi runs for `copy_from` and `fill` (taichi/_kernels.py), as tinyad kernels:
what ti.ad.verify replays, symbolically, where a `run` copied or filled a field in Python scope
(a Tape differentiates these operations directly: tinyad/tapeops.py)."""
from __future__ import annotations

from tinyad.frontend.lang import grouped, template
from tinyad.kernel import kernel


@kernel
def copy_from(dst: template(), src: template()):
    for index in grouped(dst):
        dst[index] = src[index]


@kernel
def fill(dst: template(), value: template()):
    for index in grouped(dst):
        dst[index] = value


def replay(operation: str, dst, argument):
    """(kernel, its arguments) doing `dst.<operation>(argument)`, or None where none does it
    (a load from numpy; fields with different offsets; a vector field's fill)."""
    if operation == "copy_from" and dst.offset == argument.offset:
        return copy_from, (dst, argument)
    if operation == "fill" and not dst.element_shape:
        return fill, (dst, float(argument) if dst.dtype.is_float else int(argument))
    return None
