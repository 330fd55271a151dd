"""Struct members as assignment targets (`s[i].a = ...`, `s[i] = st(...)`, `p.v[0] = ...`):
methods of the Tracer (frontend/tracer.py), kept here beside the struct values they serve."""
from __future__ import annotations

from dataclasses import dataclass

from tinyad.core import ir
from tinyad.core.errors import TinyadSyntaxError
from tinyad.frontend.matrix import Matrix
from tinyad.frontend.scope import LocalMatrix
from tinyad.frontend.structs import Struct, StructRef, is_struct_field, struct_values


@dataclass
class StructLValue:
    """A whole struct as an assignment target: each member's LValue, by name."""
    members: dict


def struct_member_lvalue(self, base, name, node):
    """The slots of one member of a struct: a field element's (StructRef), a local's."""
    if isinstance(base, StructRef):
        fld = base.member_field(name)
        if is_struct_field(fld):
            return self.struct_lvalue(StructRef(self, fld, base._key, node))
        return self.field_lvalue(fld, base.member_indices(name))
    member = getattr(base, name)
    if isinstance(member, Struct):
        return StructLValue({k: self.struct_member_lvalue(member, k, node)
                             for k in member.keys()})
    if isinstance(member, ir.Var):
        return self._binding_lvalue(member)
    if isinstance(member, Matrix) and all(isinstance(e, ir.Var) for e in member.entries):
        return self._binding_lvalue(LocalMatrix(member.entries, member.n, member.m, member.ndim))
    raise TinyadSyntaxError(f"struct member '{name}' holds a trace-time value and cannot "
                            "be assigned", self.loc(node))


def struct_lvalue(self, ref: StructRef):
    return StructLValue({name: self.struct_member_lvalue(ref, name, ref._node)
                         for name in ref.names()})


def assign_struct(self, lv: StructLValue, value, node):
    """`s[i] = value`: member by member, every member's value read before any is written."""
    names = list(lv.members)
    values = [self.snapshot(v) if not isinstance(v, (Struct, StructRef)) else v
              for v in struct_values(value, names, self.loc(node))]
    for name, v in zip(names, values):
        self.assign(lv.members[name], v, node)
