"""Structs in the kernel language: `ti.types.struct(...)`, `@ti.dataclass`, `ti.Struct` values,
`s[i].member`, `s[i].method()`.

A struct type names its members and their types (a dtype, `ti.types.vector/matrix`, or a nested
struct type); a dataclass's type also has methods, bound to a value or to a field's element. A
struct field stores each member as a field of its own (tinyad/structfield.py), so autodiff sees
ordinary fields: a float member with needs_grad has a `.grad` like any field.

While tracing, `s[i]` of a struct field is a StructRef (member fields at an index: reading a
member loads it, assigning to one stores); a struct value (`st(a=..., b=...)`, or `p = s[i]`,
which copies every member into fresh locals, as Taichi does) is a Struct of kernel values.
"""
from __future__ import annotations

import inspect
import numbers

import numpy as np

from tinyad.core import builder as B
from tinyad.core import types as T
from tinyad.core.errors import TinyadAttributeError, TinyadSyntaxError, TinyadTypeError
from tinyad.core.srcloc import user_loc
from tinyad.frontend.lang import MatrixType, VectorType, types
from tinyad.frontend.matrix import Matrix


def is_struct_field(value) -> bool:
    """A struct field (tinyad/structfield.py), recognised by marker: the frontend is below it."""
    return getattr(value, "is_tinyad_struct_field", False)


class StructType:
    """`ti.types.struct(a=ti.f32, v=ti.types.vector(3, ti.f32))`; with `methods`, a
    `@ti.dataclass` class's type (`dataclass` below): its functions are its values' methods."""

    def __init__(self, members=None, methods=None, **kwargs):
        members = dict(members or {}, **kwargs)
        if not members and not methods:
            raise TinyadTypeError("a struct type needs at least one member")
        self.members = {}
        for name, kind in members.items():
            if isinstance(kind, dict):
                kind = StructType(kind)
            if not isinstance(kind, (VectorType, MatrixType, StructType)):
                kind = T.resolve_dtype(kind)
            self.members[name] = kind
        self.methods = dict(methods or {})    # name -> ti.func or Python function

    def __call__(self, *args, **kwargs):
        """A struct value: members by keyword, in order by position (or one dict or struct of
        them), each converted to its type; those not given are zero."""
        if len(args) == 1 and isinstance(args[0], (dict, Struct)) and \
                set(dict(args[0])) <= set(self.members):
            given = dict(args[0])
        else:
            if len(args) > len(self.members):
                raise TinyadTypeError(f"struct has {len(self.members)} member(s), "
                                      f"{list(self.members)}, and was given {len(args)} values")
            given = dict(zip(self.members, args))
        twice = set(given) & set(kwargs)
        if twice:
            raise TinyadTypeError(f"struct member(s) {sorted(twice)} given twice")
        given.update(kwargs)
        unknown = set(given) - set(self.members)
        if unknown:
            raise TinyadTypeError(f"struct has no member(s) {sorted(unknown)}; its members are "
                                  f"{list(self.members)}")
        return Struct({name: convert(kind, given.get(name, 0))
                       for name, kind in self.members.items()}, _type=self)

    def method(self, name, value):
        """Method `name` bound to the struct value `value` (a Struct or a field's element),
        or None."""
        fn = self.methods.get(name)
        if fn is None:
            return None
        return fn.__get__(value, type(value))    # (a ti.func binds as in a data_oriented class)

    def field(self, shape=None, name=None, offset=None, needs_grad=False, needs_dual=False,
              layout=None):
        from_api = _STRUCT_FIELD_MAKER[0]
        if from_api is None:   # pragma: no cover  (tinyad/structfield.py installs it on import)
            raise TinyadTypeError("struct fields need `import tinyad`")
        fld = from_api(self.members, shape=shape, name=name, offset=offset,
                       needs_grad=needs_grad, needs_dual=needs_dual)
        object.__setattr__(fld, "struct_type", self)     # (its elements' methods)
        return fld

    def __repr__(self):
        return f"struct({', '.join(f'{k}={v}' for k, v in self.members.items())})"


_STRUCT_FIELD_MAKER = [None]   # the API layer's struct field constructor (structfield.py)


def dataclass(cls) -> StructType:
    """`@ti.dataclass`: the class's annotated members make a struct type, and its functions
    (ti.funcs for kernels, plain ones for Python scope) its values' methods."""
    members = {}
    # (eval_str: under `from __future__ import annotations` they are strings)
    for name, kind in inspect.get_annotations(cls, eval_str=True).items():
        if name in vars(cls):
            raise TinyadSyntaxError("Default value in @dataclass is not supported.", user_loc(),
                                    hint=f"give {cls.__name__}.{name} its value where a "
                                         f"{cls.__name__} is made")
        members[name] = kind
    methods = {name: fn for name, fn in vars(cls).items()
               if not name.startswith("__") and callable(fn) and name not in members}
    kind = StructType(members, methods)
    kind.__name__ = kind.__qualname__ = cls.__name__
    return kind


def convert(kind, value):
    """`value` as a member of type `kind` (a scalar cast, a vector/matrix, a nested struct)."""
    if isinstance(kind, StructType):
        return kind(value) if not isinstance(value, Struct) else kind(dict(value.items()))
    if isinstance(kind, (VectorType, MatrixType)):
        if isinstance(value, Matrix):
            value = value.entries
        if isinstance(value, np.ndarray):
            value = value.ravel().tolist()
        return kind(value)
    if isinstance(value, (Matrix, list, tuple, Struct)):
        raise TinyadTypeError(f"a {kind} struct member cannot hold a {type(value).__name__}")
    if B.is_expr(value):
        return B.cast(value, kind)
    if isinstance(value, (numbers.Number, np.generic)):   # converted as a cast (ints wrap: an
        return np.array(value).astype(kind.np)[()]          # i16 member given 65537 holds 1)
    return value


class Struct:
    """A struct value: `ti.Struct(a=1.0, v=ti.Vector([...]))`, or a kernel's copy of `s[i]`.
    Members read as attributes (`p.a`) or by name (`p["a"]`)."""

    def __init__(self, *args, _type=None, **kwargs):
        if args and not (len(args) == 1 and isinstance(args[0], dict)):
            raise TinyadTypeError("ti.Struct takes its members as a dict or by name")
        members = dict(args[0]) if args else {}
        members.update(kwargs)
        object.__setattr__(self, "_members", members)
        object.__setattr__(self, "_type", _type)     # the StructType that made it, or None

    def __getattr__(self, name):
        members = object.__getattribute__(self, "_members")
        if name in members:
            return members[name]
        kind = object.__getattribute__(self, "_type")
        method = kind.method(name, self) if kind is not None else None
        if method is not None:
            return method
        raise TinyadAttributeError(f"struct has no member '{name}'; its members are "
                                   f"{list(members)}")

    def __setattr__(self, name, value):   # Python scope: a plain value
        if name not in self._members:
            raise AttributeError(f"struct has no member '{name}'")
        self._members[name] = value

    def __getitem__(self, name):
        return self._members[name]

    def items(self):
        return self._members.items()

    def keys(self):
        return self._members.keys()

    def to_dict(self):
        return {k: (v.to_dict() if isinstance(v, Struct) else
                    v.to_numpy() if isinstance(v, Matrix) else v)
                for k, v in self._members.items()}

    def __repr__(self):
        return f"Struct({self._members!r})"

    # ti.Struct.field(...) and ti.Struct.field's spelling for types: installed by structfield.py


class StructRef:
    """`s[i]` of a struct field while tracing: the member fields at one index."""

    def __init__(self, tracer, struct_field, key, node):
        self._tracer, self._field, self._key, self._node = tracer, struct_field, key, node

    def member_field(self, name):
        members = self._field.members
        if name not in members:   # an AttributeError too: getattr(ref, marker, None) is None
            raise TinyadAttributeError(f"struct field {self._field.name} has no member "
                                       f"'{name}'; its members are {list(members)}",
                                       self._tracer.loc(self._node))
        return members[name]

    def member_indices(self, name):
        fld = self.member_field(name)
        return self._tracer.field_indices(fld, self._key, self._node)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        kind = self._field.struct_type
        if name not in self._field.members and kind is not None:
            method = kind.method(name, self)
            if method is not None:
                return method
        fld = self.member_field(name)
        if is_struct_field(fld):
            return StructRef(self._tracer, fld, self._key, self._node)
        return self._tracer.load_field(fld, self.member_indices(name), self._node)

    def names(self):
        return list(self._field.members)

    def items(self):
        return [(name, getattr(self, name)) for name in self.names()]


def snapshot_struct(tracer, value):
    """`p = s[i]` or `p = st(...)`: a Struct whose kernel values are fresh locals, so later
    stores to the field do not change `p` (Taichi copies struct values)."""
    out = {}
    for name, member in value.items():
        if isinstance(member, (Struct, StructRef)):
            out[name] = snapshot_struct(tracer, member)
        elif isinstance(member, Matrix):
            out[name] = member.map(lambda e: tracer.new_local(B.as_expr(e), name))
        elif B.is_expr(member) or isinstance(member, (numbers.Number, np.generic)):
            out[name] = tracer.new_local(B.as_expr(member), name)
        else:
            out[name] = member
    kind = value._type if isinstance(value, Struct) else value._field.struct_type
    return Struct(out, _type=kind)


def struct_values(value, names, loc):
    """The member values to assign from `value` (a Struct, a StructRef or a dict)."""
    if isinstance(value, (Struct, StructRef)):
        items = dict(value.items())
    elif isinstance(value, dict):
        items = value
    else:
        raise TinyadTypeError(f"cannot assign a {type(value).__name__} to a struct", loc)
    missing = [n for n in names if n not in items]
    if missing:
        raise TinyadTypeError(f"the struct value lacks member(s) {missing}", loc)
    return [items[n] for n in names]


types.struct = StructType    # ti.types.struct (lang.py's namespace; structs build on lang)
