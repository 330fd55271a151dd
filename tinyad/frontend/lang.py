"""Kernel-language functions that are not math: static, ndrange, atomics, select, cast, random,
types. The frontend recognises a few of them by identity and treats them specially (static,
loop_config, stop_grad, the atomics: frontend/exprs.py)."""
from __future__ import annotations

import itertools

import numpy as np

from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import TinyadAssertionError, TinyadTypeError, missing_name
from tinyad.frontend.matrix import Matrix, entrywise


def static(value, *more):
    """Evaluate at trace time (loops unrolled, branches chosen); tinyad checks it is static."""
    return (value, *more) if more else value


class ndrange:  # noqa: N801  (Taichi's name)
    """`ti.ndrange(4, (1, 5))`: a multi-dimensional range; parallel when outermost."""

    def __init__(self, *extents):
        self.bounds = []
        for e in extents:
            if isinstance(e, (tuple, list)):
                if len(e) != 2:
                    raise TinyadTypeError(f"ndrange bounds must be (start, stop), got {e!r}",
                                          B.current_loc())
                self.bounds.append((e[0], e[1]))
            else:
                self.bounds.append((0, e))
        for bound in (v for pair in self.bounds for v in pair):
            is_float = bound.dtype.is_float if B.is_expr(bound) else isinstance(
                bound, (float, np.floating))
            if is_float:        # (a cast would have quietly dropped the fractions)
                raise TinyadTypeError(
                    "Every argument of ndrange should be an integer scalar or a tuple/list of "
                    f"(int, int), got {bound!r}", B.current_loc(),
                    hint="convert with int(...) or ti.cast(..., ti.i32)")

    def __iter__(self):  # static iteration: ti.static(ti.ndrange(3, 3))
        if any(B.is_expr(v) for b in self.bounds for v in b):
            raise TinyadTypeError("ti.static(ti.ndrange(...)) needs bounds known at trace time",
                                  B.current_loc())
        return itertools.product(*(range(int(a), int(b)) for a, b in self.bounds))


class grouped:  # noqa: N801
    """`ti.grouped(x)` or `ti.grouped(ti.ndrange(...))`: one vector index instead of several."""

    def __init__(self, iterable):
        self.iterable = iterable

    def __iter__(self):
        for index in self.iterable:
            yield Matrix(list(index))


def select(cond, a, b):
    """`a if cond else b`, without branching; element-wise when any operand is a matrix."""
    shaped = next((v for v in (cond, a, b) if isinstance(v, Matrix)), None)
    if shaped is None:
        return B.select(cond, a, b)
    c, x, y = (_as_matrix(v, shaped) for v in (cond, a, b))
    return shaped._like([B.select(*triple) for triple in zip(c.entries, x.entries, y.entries)])


def raw_div(a, b):
    """C's division: integers truncate toward zero (-7 // 2 is -4, raw_div(-7, 2) is -3);
    floats divide."""
    return entrywise(_raw_div, a, b)


def raw_mod(a, b):
    """C's remainder: the sign of the dividend (raw_mod(-7, 2) is -1, -7 % 2 is 1); for floats
    C's fmod."""
    return entrywise(_raw_mod, a, b)


def zero(x):
    """A zero of x's type and shape (`ti.zero(v)`), as Taichi's."""
    return _like(x, 0)


def one(x):
    """A one of x's type and shape (`ti.one(v)`), as Taichi's."""
    return _like(x, 1)


def _like(x, value):
    if isinstance(x, Matrix):
        return x.map(lambda e: _like(e, value))
    return B.cast(value, x.dtype) if B.is_expr(x) else type(x)(value)


def bit_shr(x, n):
    """Logical shift right: zeros come in from the left whatever x's sign (`>>` on a signed
    integer copies the sign bit). Taichi's ti.bit_shr."""
    if isinstance(x, Matrix):
        return x.map(lambda e: bit_shr(e, n))
    if not (B.is_expr(x) or B.is_expr(n)):   # Python numbers: Python's >>, as Taichi's
        return x >> n                         # (ti.bit_shr(-8, 1) is -4 there too)
    dtype = x.dtype if B.is_expr(x) else B.python_dtype(x)
    if not dtype.is_int:
        raise TinyadTypeError(f"ti.bit_shr needs an integer, got {dtype}", B.current_loc())
    unsigned = T.BY_NAME["u" + dtype.name[1:]] if dtype.name.startswith("i") else dtype
    return B.cast(B.binary("shr", B.cast(B.as_expr(x), unsigned), n), dtype)


def _raw_div(a, b):
    if not is_integer(a, b):
        return B.binary("truediv", a, b)
    floor, rest = B.binary("floordiv", a, b), B.binary("mod", a, b)
    return B.select(_rounded_down(a, b, rest), B.binary("add", floor, 1), floor)


def _raw_mod(a, b):
    if not is_integer(a, b):
        quotient = B.binary("truediv", a, b)
        toward_zero = B.select(B.binary("lt", quotient, 0), B.unary("ceil", quotient),
                               B.unary("floor", quotient))
        return B.binary("sub", a, B.binary("mul", b, toward_zero))
    rest = B.binary("mod", a, b)
    return B.select(_rounded_down(a, b, rest), B.binary("sub", rest, b), rest)


def _rounded_down(a, b, rest):
    """Did floor division round a negative quotient down (the operands' signs differ and it
    has a remainder), where C truncates it up?"""
    return B.binary("and", B.binary("ne", rest, 0),
                    B.binary("ne", B.binary("lt", a, 0), B.binary("lt", b, 0)))


def is_integer(*values) -> bool:
    """Are these all integers: Python or numpy integers, or integer expressions?"""
    return all((v.dtype.is_int if B.is_expr(v) else isinstance(v, (int, np.integer)))
               for v in values)


def _as_matrix(value, like: Matrix) -> Matrix:
    if isinstance(value, Matrix):
        return value
    return like._like([value] * len(like.entries))


def cast(value, dtype):
    dtype = T.resolve_dtype(dtype)
    if isinstance(value, Matrix):
        return value.cast(dtype)
    if not B.is_expr(value):
        return float(value) if dtype.is_float else int(value)
    return B.cast(value, dtype)


def _cast_to_dtype(dtype: T.DType, value):
    """`ti.f32(x)`: cast to this type, as Taichi allows (a number, a traced value, a matrix)."""
    if getattr(value, "is_tinyad_matrix", False):
        return value.cast(dtype)
    if B.is_expr(value):
        return B.cast(value, dtype)
    if B.current_loc().line:     # in a kernel: a constant of this type (ti.u64(2**63)
        return B.const(value, dtype)   # holds it, ti.u16(-1) is refused, as in Taichi)
    return float(value) if dtype.is_float else int(value)


T.DType.__call__ = _cast_to_dtype     # (core/types.py stands below the builder it needs)


# ti.random() in Python scope draws from ti.init's generator, which ti.init hands over here.
_python_scope_rng = np.random.default_rng(0)


def set_python_scope_rng(rng) -> np.random.Generator:
    """Draw Python scope's ti.random() from `rng` from now on; -> the generator it replaces."""
    global _python_scope_rng
    previous, _python_scope_rng = _python_scope_rng, rng
    return previous


def random(dtype=float):
    """Uniform in [0, 1) for floats; a random 32-bit integer for int types."""
    dtype = T.resolve_dtype(dtype)
    if B.current_loc().line == 0:  # Python scope
        rng = _python_scope_rng
        return float(rng.random()) if dtype.is_float else int(rng.integers(2**31))
    # one draw, in a local: an expression that uses it twice (v.normalized() of a vector
    # holding it) must see the same number, not draw again
    return B.local(B.random(dtype), "r")


def stop_grad(value):
    """The value, with no gradient flowing back through it. (On a field, see the frontend.)"""
    if isinstance(value, Matrix):
        return value.map(lambda v: B.unary("stop_grad", v))
    return B.unary("stop_grad", value) if B.is_expr(value) else value


def _atomic(op: str):
    """ti.atomic_<name>, for IR op `op`: traced by the frontend (frontend/atomics.py), which
    needs the target's location; called in Python scope, it says where it belongs."""
    name = "atomic_" + op.removeprefix("bit_")

    def atomic(target, value):
        raise TinyadTypeError(f"ti.{name} is only available inside kernels")
    atomic.__name__ = atomic.__qualname__ = name
    return atomic


ATOMICS = {_atomic(op): op for op in ir.ATOMIC_OPS}    # ti.atomic_<name> -> the op it makes
atomic_add, atomic_sub, atomic_min, atomic_max, atomic_and, atomic_or, atomic_xor = ATOMICS


def loop_config(serialize=False, block_dim=None, parallelize=None, **_ignored):
    """Applies to the next outermost loop; handled by the frontend."""


def block_local(*fields):
    """Taichi's hint to cache fields in GPU shared memory (BLS): a performance hint that
    changes no value, so tinyad accepts it and does nothing."""


# ---- annotations and types ---------------------------------------------------------------

class template:  # noqa: N801
    """`x: ti.template()`: the argument is captured at trace time (fields, Python values)."""


class VectorType:
    def __init__(self, n, dtype):
        self.n, self.dtype = n, dtype
        self.shape = (n,)

    def __call__(self, *entries):
        flat = _flatten_entries(entries)
        if len(flat) == 1 and self.n > 1:
            flat = flat * self.n
        if len(flat) != self.n:
            raise TinyadTypeError(f"vector({self.n}) needs {self.n} entries, got {len(flat)}",
                                  B.current_loc())
        return Matrix(flat, dt=T.resolve_dtype(self.dtype) if self.dtype else None)

    def __repr__(self):
        return f"ti.types.vector({self.n}, {self.dtype or 'default_fp'})"


class MatrixType:
    def __init__(self, n, m, dtype):
        self.n, self.m, self.dtype = n, m, dtype
        self.shape = (n, m)

    def __call__(self, *entries):
        flat = _flatten_entries(entries)
        if len(flat) == 1:
            flat = flat * (self.n * self.m)
        if len(flat) != self.n * self.m:
            raise TinyadTypeError(f"matrix({self.n}, {self.m}) needs {self.n * self.m} entries",
                                  B.current_loc())
        rows = [flat[i * self.m:(i + 1) * self.m] for i in range(self.n)]
        return Matrix(rows, dt=T.resolve_dtype(self.dtype) if self.dtype else None)

    def __repr__(self):
        return f"ti.types.matrix({self.n}, {self.m}, {self.dtype or 'default_fp'})"


class NdarrayType:
    """`ti.types.ndarray(dtype=None, ndim=None, needs_grad=None)`: a kernel parameter bound to an
    ndarray (or a numpy array) at each launch. `dtype` is the element type (a scalar dtype, or a
    vector/matrix type whose axes trail the array's), `ndim` the number of array axes;
    `needs_grad=False` gives the kernel's adjoint no gradient of this argument. Taichi's older
    spellings of the element type are taken too: `element_shape=(3,)` (a vector of 3 `dtype`),
    and `element_dim=1` or `2` (vectors or matrices, their sizes the array's trailing axes)."""

    def __init__(self, dtype=None, ndim=None, element_dim=None, element_shape=None,
                 field_dim=None, needs_grad=None, boundary="unsafe"):
        if field_dim is not None:
            raise TinyadTypeError("ti.types.ndarray(field_dim=...) is gone from Taichi too: "
                                  "say ndim=")
        if element_dim not in (None, 0, 1, 2) or (element_shape is not None and (
                len(element_shape) > 2 or element_dim not in (None, len(element_shape)))):
            raise TinyadTypeError(
                f"ti.types.ndarray(element_dim={element_dim!r}, element_shape="
                f"{element_shape!r}): elements are scalars (0), vectors (1) or matrices (2), "
                "and element_shape has that many sizes")
        if element_shape:
            dtype = VectorType(element_shape[0], dtype) if len(element_shape) == 1 else \
                MatrixType(*element_shape, dtype)
        self.dtype, self.ndim, self.needs_grad = dtype, ndim, needs_grad
        # element_dim without sizes: the array's last element_dim axes are the element's
        self.element_dim = element_dim if not element_shape else None
        if boundary != "unsafe":
            raise TinyadTypeError(f"ti.types.ndarray(boundary={boundary!r}) is not supported by "
                                  "tinyad: indices must stay within the array")

    @property
    def element_shape(self) -> tuple | None:
        """The element type's shape, or None when the annotation does not say."""
        if isinstance(self.dtype, (VectorType, MatrixType)):
            return self.dtype.shape
        if self.element_dim:             # vectors or matrices, sized by each array
            return None
        return () if self.dtype is not None or self.element_dim == 0 else None


def _flatten_entries(entries):
    flat = []
    for e in entries:
        if isinstance(e, Matrix):
            flat.extend(e.entries)
        elif isinstance(e, (list, tuple)):
            flat.extend(_flatten_entries(e))
        else:
            flat.append(e)
    return flat


# Taichi's ti.types that tinyad leaves out, and what to do instead.
TYPES_LEFT_OUT = {
    "sparse_matrix_builder": "sparse matrices are not in tinyad: build and solve the system "
                             "with scipy from x.to_numpy()",
    "texture": "textures are not in tinyad", "rw_texture": "textures are not in tinyad",
    "argpack": "argument packs are not in tinyad: pass the fields and values one by one",
}


class _TypesNamespace(type):
    """`ti.types.<name>` for a name tinyad lacks: a clear error at the user's line, not
    Python's AttributeError from deep inside (a kernel annotated with a sparse matrix builder)."""

    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise missing_name("ti.types", name, [n for n in dir(cls) if not n.startswith("_")],
                           TYPES_LEFT_OUT, f"tinyad has no ti.types.{name}")


class types(metaclass=_TypesNamespace):  # noqa: N801  (the `ti.types` namespace)
    vector = VectorType
    matrix = MatrixType
    template = template
    i32, i64, f32, f64, u8 = T.i32, T.i64, T.f32, T.f64, T.u8
    i8, i16, u16, u32, u64 = T.i8, T.i16, T.u16, T.u32, T.u64

    ndarray = None   # NdarrayType, set below

    @staticmethod
    def is_integral(dtype) -> bool:
        return T.resolve_dtype(dtype).is_int

    @staticmethod
    def is_signed(dtype) -> bool:
        return not T.resolve_dtype(dtype).name.startswith("u")

    @staticmethod
    def is_real(dtype) -> bool:
        return T.resolve_dtype(dtype).is_float


def static_assert(cond, msg=None):
    """`ti.static_assert(cond, msg)`: a condition checked while the kernel is traced."""
    if B.is_expr(cond) or isinstance(cond, Matrix):
        raise TinyadTypeError("Static assert with non-static condition: ti.static_assert needs "
                              "a condition known at trace time, not a kernel value",
                              B.current_loc(), hint="use `assert` for a run-time condition")
    if not cond:
        raise TinyadAssertionError(msg or "ti.static_assert failed", B.current_loc())


types.ndarray = NdarrayType
