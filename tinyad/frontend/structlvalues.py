"""Struct members as assignment targets (`s[i].a = ...`, `s[i] = st(...)`, `p.v[0] = ...`):
methods of the Tracer (frontend/tracer.py), kept here beside the struct values they serve."""
from __future__ import annotations

import numpy as np

from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import TinyadSyntaxError
from tinyad.frontend.lvalues import FieldRef, LocalRef, LValue, StructLValue
from tinyad.frontend.matrix import Matrix
from tinyad.frontend.structs import Struct, StructRef, is_struct_field


def struct_member_lvalue(self, base, name, node):
    """The slots of one member of a struct: a field element's (StructRef), a local's."""
    if isinstance(base, StructRef):
        fld = base.member_field(name)
        if is_struct_field(fld):
            return self.struct_lvalue(StructRef(self, fld, base._key, node))
        indices = base.member_indices(name)
        comps = [()] if not fld.element_shape else list(np.ndindex(*fld.element_shape))
        return LValue([FieldRef(fld, indices + tuple(B.const(c, T.i32) for c in comp))
                       for comp in comps], fld.element_shape)
    member = getattr(base, name)
    if isinstance(member, Struct):
        return StructLValue({k: self.struct_member_lvalue(member, k, node)
                             for k in member.keys()})
    if isinstance(member, ir.Var):
        return LValue([LocalRef(member)], ())
    if isinstance(member, Matrix) and all(isinstance(e, ir.Var) for e in member.entries):
        return LValue([LocalRef(e) for e in member.entries], member.shape)
    raise TinyadSyntaxError(f"struct member '{name}' holds a trace-time value and cannot "
                            "be assigned", self.loc(node))


def struct_lvalue(self, ref: StructRef):
    return StructLValue({name: self.struct_member_lvalue(ref, name, ref._node)
                         for name in ref.names()})
