"""Struct fields: `ti.Struct.field({...}, shape=...)` and `ti.types.struct(...).field(...)`.

A struct field is a group of ordinary fields, one per member (`s.a` is the member field
itself, so `s.a.grad`, `s.a.to_numpy()` work as for any field), placed together. Float members
get gradients with needs_grad=True; integer members never have one (as in Taichi).
"""
from __future__ import annotations

from tinyad.allocation import normalize_shape
from tinyad.core import types as T
from tinyad.core.errors import TinyadAttributeError, TinyadTypeError
from tinyad.field import field, matrix_field, vector_field
from tinyad.frontend import structs
from tinyad.frontend.lang import MatrixType, VectorType
from tinyad.frontend.matrix import Matrix
from tinyad.frontend.structs import Struct, StructType
from tinyad.varnames import caller_variable_name


class StructField:
    is_tinyad_struct_field = True    # how the frontend recognises one (frontend/structs.py)
    struct_type = None               # a @ti.dataclass type's field: its elements' methods

    def __init__(self, members: dict, name: str):
        object.__setattr__(self, "members", members)
        object.__setattr__(self, "name", name)

    # ---- members and layout ------------------------------------------------------------------
    def __getattr__(self, name):
        members = object.__getattribute__(self, "members")
        if name in members:
            return members[name]
        raise TinyadAttributeError(f"struct field {self.name} has no member '{name}'; its "
                                   f"members are {list(members)}")

    def __setattr__(self, name, value):
        raise AttributeError(f"struct field {self.name}: assign members through an index, "
                             f"e.g. {self.name}[i].{name} = value")

    def keys(self):
        return list(self.members)

    def get_member_field(self, name):
        return self.members[name]

    def _leaves(self):
        for member in self.members.values():
            yield from (member._leaves() if isinstance(member, StructField) else (member,))

    @property
    def shape(self):
        return next(self._leaves()).shape

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def snode(self):
        return next(self._leaves()).snode

    @property
    def is_placed(self):
        return next(self._leaves()).is_placed

    def __repr__(self):
        return f"<tinyad struct field {self.name}: {', '.join(self.members)}>"

    # ---- Python-scope access -----------------------------------------------------------------
    def __getitem__(self, key):
        return _ElementStruct(self, key)

    def __setitem__(self, key, value):
        for name, v in _member_values(self, value).items():
            member = self.members[name]
            if isinstance(member, StructField):
                member[key] = v
            else:
                member[key] = v.to_numpy() if isinstance(v, Matrix) else v

    def to_numpy(self):
        return {name: m.to_numpy() for name, m in self.members.items()}

    def from_numpy(self, arrays: dict):
        for name, array in _member_values(self, arrays).items():
            self.members[name].from_numpy(array)

    def fill(self, value):
        for member in self.members.values():
            member.fill(value)

    def to_torch(self, device=None):
        raise TinyadTypeError("tinyad has no torch interop: use to_numpy()")


class _ElementStruct:
    """`s[i]` in Python scope: members read and written through to the fields."""

    def __init__(self, fld, key):
        object.__setattr__(self, "_field", fld)
        object.__setattr__(self, "_key", key)

    def __getattr__(self, name):
        member = self._field.members.get(name)
        if member is None:
            raise AttributeError(f"struct field {self._field.name} has no member '{name}'")
        return member[self._key]

    def __setattr__(self, name, value):
        member = self._field.members.get(name)
        if member is None:
            raise AttributeError(f"struct field {self._field.name} has no member '{name}'")
        member[self._key] = value.to_numpy() if isinstance(value, Matrix) else value

    def __getitem__(self, name):
        return getattr(self, name)

    def items(self):
        return [(name, getattr(self, name)) for name in self._field.members]

    def keys(self):
        return list(self._field.members)

    def to_dict(self):
        return {name: (v.to_dict() if isinstance(v, _ElementStruct) else
                       v.to_numpy() if isinstance(v, Matrix) else v) for name, v in self.items()}

    def __repr__(self):
        return f"{self._field.name}[{self._key}] = {self.to_dict()}"


def _member_values(fld: StructField, value) -> dict:
    if isinstance(value, (Struct, _ElementStruct)):
        value = dict(value.items())
    if not isinstance(value, dict):
        raise TinyadTypeError(f"struct field {fld.name} takes a dict or a struct value, got "
                              f"{type(value).__name__}")
    unknown = set(value) - set(fld.members)
    if unknown:
        raise TinyadTypeError(f"struct field {fld.name} has no member(s) {sorted(unknown)}")
    return value


def struct_field(members, shape=None, name=None, offset=None, needs_grad=False,
                 needs_dual=False, layout=None) -> StructField:
    """`ti.Struct.field({"a": ti.f32, "v": ti.types.vector(3, ti.f32)}, shape=n)`."""
    kinds = members.members if isinstance(members, StructType) else StructType(members).members
    name = name or caller_variable_name() or "struct"
    shape = normalize_shape(shape)
    fields = {}
    for member, kind in kinds.items():
        member_name = f"{name}.{member}"
        grad = needs_grad and _is_float(kind)
        dual = needs_dual and _is_float(kind)
        if isinstance(kind, StructType):
            fields[member] = struct_field(kind, shape, member_name, offset, needs_grad,
                                          needs_dual)
        elif isinstance(kind, VectorType):
            fields[member] = vector_field(kind.n, _dtype(kind), shape, member_name, offset,
                                          grad, dual)
        elif isinstance(kind, MatrixType):
            fields[member] = matrix_field(kind.n, kind.m, _dtype(kind), shape, member_name,
                                          offset, grad, dual)
        else:
            fields[member] = field(kind, shape, member_name, offset, grad, dual)
    return StructField(fields, name)


def _dtype(kind):
    return T.resolve_dtype(kind.dtype) if kind.dtype is not None else T.f32


def _is_float(kind) -> bool:
    if isinstance(kind, StructType):
        return True     # decided member by member below it
    if isinstance(kind, (VectorType, MatrixType)):
        return _dtype(kind).is_float
    return kind.is_float


Struct.field = staticmethod(struct_field)
structs._STRUCT_FIELD_MAKER[0] = struct_field
