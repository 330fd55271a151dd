"""The few pieces of Taichi's internals that Taichi's own autodiff tests read, answered from
tinyad's state: `AutodiffMode` (a kernel's `.autodiff_mode`, `Tape.modes`), `SNodeGradType`
and `SNode.ptr` (`get_snode_grad_type()`, `has_adjoint_checkbit()`).

Taichi defines these enums in `taichi.lang.enums`; a program that imports them from there under
`tinyad run` (or a test harness with its own stand-in) holds another enum class than tinyad's.
So a member here equals any enum member of the same class name and member name: Taichi's,
a stand-in's, or its own.
"""
from __future__ import annotations

import enum

from tinyad.runtime import runtime


class _TaichiEnum(enum.Enum):
    def __eq__(self, other):
        if isinstance(other, enum.Enum):
            return (type(other).__name__, other.name) == (type(self).__name__, self.name)
        return NotImplemented

    def __hash__(self):
        return hash((type(self).__name__, self.name))


class AutodiffMode(_TaichiEnum):
    """How a kernel runs: plain (NONE), inside Tape(validation=True) (VALIDATION), as a tangent
    (FORWARD) or an adjoint (REVERSE)."""
    NONE = 0
    VALIDATION = 1
    FORWARD = 2
    REVERSE = 3


class SNodeGradType(_TaichiEnum):
    """Which of a field's twins a place node holds."""
    PRIMAL = 0
    ADJOINT = 1
    DUAL = 2
    ADJOINT_CHECKBIT = 3


_GRAD_TYPES = {"primal": SNodeGradType.PRIMAL, "grad": SNodeGradType.ADJOINT,
               "dual": SNodeGradType.DUAL}


class SNodeHandle:
    """`snode.ptr`: in Taichi the C++ SNode; here the answers its tests ask of it."""

    def __init__(self, snode):
        self._snode = snode

    def get_snode_grad_type(self) -> SNodeGradType:
        placed = self._snode.placed
        return SNodeGradType.PRIMAL if placed is None else _GRAD_TYPES[placed.role]

    def has_adjoint_checkbit(self) -> bool:
        """Taichi allocates an adjoint checkbit (the bit its validation sets when a field's
        gradient is read) for a primal field with a gradient under ti.init(debug=True). tinyad's
        checker needs no bit: this says whether Taichi would have one."""
        placed = self._snode.placed
        return bool(runtime.config.debug and placed is not None and placed.role == "primal"
                    and placed.has_grad and placed.grad.is_placed)
