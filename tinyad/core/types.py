"""Scalar data types and Taichi's promotion rules.

Every IR expression carries one of these. Vectors and matrices never reach the IR: the
frontend scalarizes them, so a dtype is always a scalar type.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np

from tinyad.core.errors import TinyadTypeError


@dataclass(frozen=True)
class DType:
    name: str          # "f32", as printed in the IR
    kind: str          # "float" or "int"
    bits: int

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def np(self) -> type:
        """The numpy scalar type that holds values of this dtype."""
        return _NUMPY[self.name]

    def __repr__(self) -> str:
        return self.name

    # `ti.f32(x)` casts: frontend/lang.py gives DType its __call__ (the builder types with DType)


i32 = DType("i32", "int", 32)
i64 = DType("i64", "int", 64)
u8 = DType("u8", "int", 8)
i8 = DType("i8", "int", 8)
i16 = DType("i16", "int", 16)
u16 = DType("u16", "int", 16)
u32 = DType("u32", "int", 32)
u64 = DType("u64", "int", 64)
f32 = DType("f32", "float", 32)
f64 = DType("f64", "float", 64)



@dataclass(frozen=True)
class TypingDefaults:
    """The types a Python float / int gets in a kernel (`ti.init(default_fp=, default_ip=)`)."""
    fp: DType = f32
    ip: DType = i32


# Set by ti.init (tinyad/runtime.py); the typing rules (core/builder.py) read it.
_typing_defaults = TypingDefaults()


def typing_defaults() -> TypingDefaults:
    return _typing_defaults


def set_typing_defaults(defaults: TypingDefaults) -> None:
    global _typing_defaults
    _typing_defaults = defaults


class _DefaultUnsigned:
    """The unsigned type as wide as default_ip (Taichi's default_up): ti.math.uvec2's."""

    def __repr__(self):
        return "default_up"


DEFAULT_UNSIGNED = _DefaultUnsigned()


def resolve_dtype(dtype) -> DType:
    """A dtype as users write it (ti.f32, float, int, np.float32) -> DType. A string is refused,
    as Taichi refuses it: numpy would read "double" or "float" as types of its own choosing."""
    if isinstance(dtype, DType):
        return dtype
    if dtype is float:
        return typing_defaults().fp
    if dtype is int:
        return typing_defaults().ip
    if dtype is DEFAULT_UNSIGNED:
        return u64 if typing_defaults().ip.bits == 64 else u32
    if isinstance(dtype, str):
        meant = _meant(dtype)
        raise TinyadTypeError(f"a dtype is a tinyad type, not the string {dtype!r}",
                              hint=f"did you mean ti.{meant}?" if meant else
                              "a dtype is ti.f32, ti.f64, ti.i32, ti.i64, ti.u8, ...")
    try:
        return from_numpy(dtype)
    except (TypeError, ValueError):   # (numpy says ValueError of some objects: vector types)
        raise TinyadTypeError(f"{dtype!r} is not a tinyad dtype (use ti.f32, ti.f64, ti.i32, "
                              "ti.i64, float or int)",
                              hint="a dtype is ti.f32, ti.f64, ti.i32, ti.i64, ti.u8, ...") \
            from None


def _meant(text: str) -> str | None:
    """The tinyad type a dtype string probably names ("double" -> f64, "float33" -> f32)."""
    if text in BY_NAME:
        return text
    try:
        return from_numpy(text).name
    except (TypeError, ValueError):
        close = difflib.get_close_matches(text, [*BY_NAME, "float32", "float64"], n=1)
        return None if not close else close[0] if close[0] in BY_NAME else \
            from_numpy(close[0]).name


_NUMPY = {"i32": np.int32, "i64": np.int64, "u8": np.uint8, "f32": np.float32, "f64": np.float64,
          "i8": np.int8, "i16": np.int16, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}
ALL = (i32, i64, u8, f32, f64, i8, i16, u16, u32, u64)
BY_NAME = {t.name: t for t in ALL}


def int_range(dtype: DType) -> tuple[int, int]:
    """The smallest and largest values an integer type holds."""
    info = np.iinfo(dtype.np)
    return int(info.min), int(info.max)


def promote(a: DType, b: DType) -> DType:
    """Taichi's binary promotion: float beats int, then the wider type wins."""
    if a == b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.bits == b.bits:   # i32 with u32: unsigned wins, as in Taichi (and C)
        return a if a.name.startswith("u") else b
    return a if a.bits > b.bits else b


def from_numpy(dtype) -> DType:
    kind = np.dtype(dtype)
    for t in ALL:
        if np.dtype(t.np) == kind:
            return t
    raise TypeError(f"tinyad has no field type for numpy dtype {kind}")


def loses_precision(target: DType, source: DType) -> bool:
    """True when storing a `source` value into a `target` slot can lose information."""
    if target.is_int and source.is_float:
        return True
    return target.kind == source.kind and target.bits < source.bits
