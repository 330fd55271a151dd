"""`ti.Vector` / `ti.Matrix` values: small fixed-size arrays of scalars.

The entries are Python numbers in Python scope and IR expressions while a kernel is traced;
every operation here is written once for both (tinyad/build.py folds numbers). This is how
vectors and matrices are scalarized: the IR only ever sees the entries.
"""
from __future__ import annotations

import numbers

import numpy as np

from tinyad.core import builder as B
from tinyad.core import types as T
from tinyad.core.errors import TinyadIndexError, TinyadTypeError
from tinyad.core.ops import TABLE, dunder_operators

SWIZZLE_SETS = ("xyzw", "rgba", "stpq")


class Matrix:
    """An n x m matrix, or an n-vector when `ndim == 1`. Entries are stored row-major, flat."""

    is_tinyad_matrix = True   # IR expressions defer their operators to us (tinyad/ir.py)

    def __init__(self, entries, dt=None):
        rows = _to_nested(entries)
        if rows and isinstance(rows[0], list):
            self.n, self.m = len(rows), len(rows[0])
            if any(len(r) != self.m for r in rows):
                raise TinyadTypeError("matrix rows must all have the same length", B.current_loc())
            self.entries = [e for r in rows for e in r]
            self.ndim = 2
        else:
            self.n, self.m, self.ndim = len(rows), 1, 1
            self.entries = list(rows)
        if dt is not None:
            self.entries = [_cast_entry(e, dt) for e in self.entries]

    @classmethod
    def _make(cls, entries, n, m, ndim):
        out = cls.__new__(cls)
        out.entries, out.n, out.m, out.ndim = list(entries), n, m, ndim
        return out

    def _like(self, entries):
        return Matrix._make(entries, self.n, self.m, self.ndim)

    # ---- shape and element access -------------------------------------------------------
    @property
    def shape(self):
        return (self.n,) if self.ndim == 1 else (self.n, self.m)

    def __len__(self):
        return self.n

    def __iter__(self):
        if self.ndim == 1:
            return iter(self.entries)
        return iter(self._row(i) for i in range(self.n))

    def _row(self, i):
        return Matrix._make(self.entries[i * self.m:(i + 1) * self.m], self.m, 1, 1)

    def _flat_index(self, key):
        key = index_tuple(key)
        if any(B.is_expr(k) for k in key):
            return None
        if self.ndim == 1 and len(key) == 1:
            i = int(key[0])
            return i if -self.n <= i < self.n else _oob(key, self.shape)
        if self.ndim == 2 and len(key) == 2:
            i, j = int(key[0]), int(key[1])
            if 0 <= i < self.n and 0 <= j < self.m:
                return i * self.m + j
            return _oob(key, self.shape)
        raise TinyadTypeError(f"a {'x'.join(map(str, self.shape))} matrix needs {self.ndim} "
                              f"indices, got {len(key)}", B.current_loc())

    def __getattr__(self, name):
        """Swizzles: v.xy, v.zyx, c.rgb, t.st (up to 4 letters of one set)."""
        picks = self._swizzle(name)
        if picks is None:
            raise AttributeError(f"Matrix has no attribute '{name}'")
        if len(picks) == 1:
            return self.entries[picks[0]]
        return Matrix([self.entries[k] for k in picks])

    def __setattr__(self, name, value):
        """Python scope: `v.y = 3`, `v.xy = 1, 2` set those entries (through __setitem__, so a
        field element's view writes through); kernels assign swizzles in the frontend."""
        picks = self._swizzle(name)
        if picks is None:
            object.__setattr__(self, name, value)
            return
        values = [value] if len(picks) == 1 else list(
            value.entries if isinstance(value, Matrix) else value)
        if len(values) != len(picks):
            raise TinyadTypeError(f"v.{name} takes {len(picks)} values, got {len(values)}",
                                  B.current_loc())
        for k, v in zip(picks, values):
            self[k] = v

    def _swizzle(self, name):
        """The entries a swizzle name picks ([1] for y, [0, 1] for xy), or None."""
        known = self.__dict__        # (not its attributes: __getattr__ would ask again)
        if known.get("ndim") != 1 or not 1 <= len(name) <= 4:
            return None
        for letters in SWIZZLE_SETS:
            if all(c in letters for c in name):
                picks = [letters.index(c) for c in name]
                return picks if max(picks) < known["n"] else None
        return None

    def _sliced(self, key):
        """Constant slices: v[:2], m[1, :], m[0:2, 1]."""
        key = key if isinstance(key, tuple) else (key,)
        if self.ndim == 1:
            return Matrix(self.entries[key[0]])
        rows = range(self.n)[key[0]] if isinstance(key[0], slice) else [int(key[0])]
        cols = range(self.m)[key[1]] if len(key) > 1 and isinstance(key[1], slice) else \
            ([int(key[1])] if len(key) > 1 else range(self.m))
        picked = [[self[i, j] for j in cols] for i in rows]
        if len(key) > 1 and not isinstance(key[0], slice):
            return Matrix(picked[0])
        if len(key) > 1 and not isinstance(key[1], slice):
            return Matrix([row[0] for row in picked])
        return Matrix(picked)

    def __getitem__(self, key):
        if isinstance(key, Matrix):      # an index vector: ti.grouped's, or ti.Vector([i, j])
            key = index_tuple(key)
        if any(isinstance(k, slice) for k in (key if isinstance(key, tuple) else (key,))):
            return self._sliced(key)
        if self.ndim == 2 and not isinstance(key, tuple):
            if B.is_expr(key):
                rows = [self._row(i) for i in range(self.n)]
                return Matrix([[_dynamic_pick(key, [r.entries[j] for r in rows])
                                for j in range(self.m)]]).to_vector()
            return self._row(int(key))
        flat = self._flat_index(key)
        if flat is None:  # an index only known at run time: pick with selects
            key = key if isinstance(key, tuple) else (key,)
            linear = key[0] if self.ndim == 1 else B.binary("add", B.binary("mul", key[0], self.m), key[1])
            return _dynamic_pick(linear, self.entries)
        return self.entries[flat]

    def __setitem__(self, key, value):
        """Python-scope assignment; kernels assign entries through the frontend."""
        flat = self._flat_index(key)
        if flat is None:
            raise TinyadTypeError("set matrix entries with indices known at trace time",
                                  B.current_loc())
        self.entries[flat] = value

    def to_vector(self):
        return Matrix._make(self.entries, len(self.entries), 1, 1)

    # ---- element-wise arithmetic ----------------------------------------------------------
    def _zip(self, other, fn, reflected=False):
        if isinstance(other, Matrix):
            if other.shape != self.shape:
                raise TinyadTypeError(f"shape mismatch: {self.shape} and {other.shape}",
                                      B.current_loc(), hint="element-wise operations need "
                                      "vectors or matrices of the same shape")
            pairs = zip(other.entries, self.entries) if reflected else zip(self.entries, other.entries)
            return self._like([fn(a, b) for a, b in pairs])
        if isinstance(other, (list, tuple, np.ndarray)):
            return self._zip(Matrix(other), fn, reflected)
        if reflected:
            return self._like([fn(other, a) for a in self.entries])
        return self._like([fn(a, other) for a in self.entries])

    def _map(self, fn):
        return self._like([fn(a) for a in self.entries])

    # + - * / ... < <= ... entry by entry: see _install_operators at the end.
    def __neg__(self): return self._map(lambda a: B.unary("neg", a))
    def __pos__(self): return self
    def __abs__(self): return self._map(lambda a: B.unary("abs", a))

    def map(self, fn):
        """Apply a scalar function to every entry."""
        return self._map(fn)

    # ---- linear algebra ------------------------------------------------------------------
    def __matmul__(self, other):
        if not isinstance(other, Matrix):
            other = Matrix(other)
        if self.ndim == 1:
            raise TinyadTypeError("`@` needs a matrix on the left; use v.dot(w) for vectors",
                                  B.current_loc())
        if self.m != other.n:
            raise TinyadTypeError(f"cannot multiply {self.shape} by {other.shape}", B.current_loc(),
                                  hint="`a @ b` needs as many columns in a as rows in b; "
                                       "a.transpose() may be meant")
        if other.ndim == 1:
            return Matrix([_sum(self[i, k] * other.entries[k] for k in range(self.m))
                           for i in range(self.n)])
        return Matrix([[_sum(self[i, k] * other[k, j] for k in range(self.m))
                        for j in range(other.m)] for i in range(self.n)])

    def __rmatmul__(self, other):
        return Matrix(other) @ self

    def dot(self, other):
        other = other if isinstance(other, Matrix) else Matrix(other)
        if len(other.entries) != len(self.entries):
            raise TinyadTypeError(f"dot of {self.shape} and {other.shape}: the shapes differ",
                                  B.current_loc(), hint="a.dot(b) needs vectors of one length")
        return _sum(a * b for a, b in zip(self.entries, other.entries))

    def cross(self, other):
        a, b = self.entries, (other if isinstance(other, Matrix) else Matrix(other)).entries
        if len(a) == 2:
            return a[0] * b[1] - a[1] * b[0]
        return Matrix([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                       a[0] * b[1] - a[1] * b[0]])

    def outer_product(self, other):
        other = other if isinstance(other, Matrix) else Matrix(other)
        return Matrix([[a * b for b in other.entries] for a in self.entries])

    def norm_sqr(self):
        return _sum(a * a for a in self.entries)

    def norm(self, eps=0):
        return B.unary("sqrt", B.binary("add", self.norm_sqr(), eps) if eps else self.norm_sqr())

    def norm_inv(self, eps=0):
        return B.unary("rsqrt", B.binary("add", self.norm_sqr(), eps) if eps else self.norm_sqr())

    def normalized(self, eps=0):
        if not eps:
            return self * self.norm_inv()
        # Taichi's: v / (|v| + eps). (v * norm_inv(eps) is v / sqrt(|v|^2 + eps): DiffTaichi's
        # billiards normalizes with eps 1e-6, and its collisions moved by 2e-8 a step.)
        return self * B.binary("truediv", 1, B.binary("add", self.norm(), eps))

    def sum(self):
        return _sum(self.entries)

    def max(self):
        return _reduce(lambda a, b: B.binary("max", a, b), self.entries)

    def min(self):
        return _reduce(lambda a, b: B.binary("min", a, b), self.entries)

    def any(self):
        """1 if some entry is nonzero, else 0 (Taichi's; Python's any() on a matrix is this)."""
        return _reduce(lambda a, b: B.binary("or", a, b),
                       [B.binary("ne", e, 0) for e in self.entries])

    def all(self):
        """1 if every entry is nonzero, else 0 (Python's all() on a matrix is this)."""
        return _reduce(lambda a, b: B.binary("and", a, b),
                       [B.binary("ne", e, 0) for e in self.entries])

    def transpose(self):
        if self.ndim == 1:
            return Matrix([self.entries])
        return Matrix([[self[i, j] for i in range(self.n)] for j in range(self.m)])

    @property
    def T(self):
        return self.transpose()

    def trace(self):
        return _sum(self[i, i] for i in range(self.n))

    def determinant(self):
        from tinyad.frontend.linalg import determinant  # noqa: PLC0415  (linalg builds on Matrix)
        return determinant(self)

    def inverse(self):
        from tinyad.frontend.linalg import inverse  # noqa: PLC0415
        return inverse(self)

    def cast(self, dtype):
        return self._map(lambda a: _cast_entry(a, dtype))

    def to_numpy(self):
        if any(B.is_expr(e) for e in self.entries):
            raise TinyadTypeError("to_numpy() is for Python scope", B.current_loc())
        return np.array(self.entries).reshape(self.shape)

    def to_list(self):
        return self.to_numpy().tolist()

    def __repr__(self):
        """Its values as numpy prints them (`[0. 1. 2.]`), as Taichi's print(x[i]) shows."""
        if any(B.is_expr(e) for e in self.entries):
            return f"Matrix(<traced {self.shape}>)"
        return str(self.to_numpy())

    def __eq__(self, other):
        """Entry by entry (1 / 0), as Taichi's; in Python scope a Comparison, which is true
        when every entry is (`assert a == b` means it), or False for another shape."""
        if _traced(self) or _traced(other):
            return self._zip(other, lambda a, b: B.binary("eq", a, b))
        theirs = np.asarray(other.to_numpy() if isinstance(other, Matrix) else other)
        if theirs.shape not in ((), self.shape):
            return False
        return Comparison.of(self.to_numpy() == theirs)

    def __ne__(self, other):
        # (Python's default negates __eq__'s result, and a traced matrix is no truth value)
        if _traced(self) or _traced(other):
            return self._zip(other, lambda a, b: B.binary("ne", a, b))
        return not self.__eq__(other)

    __hash__ = object.__hash__

    # ---- constructors (ti.Matrix.identity, ti.Vector.zero, ...) -----------------------
    @staticmethod
    def rotation2d(alpha):
        """The 2 x 2 counter-clockwise rotation by `alpha` (radians)."""
        c, s = B.unary("cos", alpha), B.unary("sin", alpha)
        return Matrix([[c, -s], [s, c]])

    @staticmethod
    def identity(dt, n):
        return Matrix([[_cast_entry(1 if i == j else 0, dt) for j in range(n)] for i in range(n)])

    @staticmethod
    def zero(dt, n, m=None):
        if m is None:
            return Matrix([_cast_entry(0, dt) for _ in range(n)])
        return Matrix([[_cast_entry(0, dt) for _ in range(m)] for _ in range(n)])

    @staticmethod
    def one(dt, n, m=None):
        if m is None:
            return Matrix([_cast_entry(1, dt) for _ in range(n)])
        return Matrix([[_cast_entry(1, dt) for _ in range(m)] for _ in range(n)])

    @staticmethod
    def unit(n, i, dt=None):
        return Matrix([_cast_entry(1 if k == i else 0, dt) for k in range(n)])

    @staticmethod
    def rows(rows):
        return Matrix([list(r) for r in rows])

    @staticmethod
    def cols(cols):
        return Matrix([list(c) for c in cols]).transpose()

    @staticmethod
    def diag(dim, val):
        return Matrix([[val if i == j else 0 for j in range(dim)] for i in range(dim)])


def _to_nested(entries):
    if isinstance(entries, Matrix):
        return [list(r.entries) for r in entries] if entries.ndim == 2 else list(entries.entries)
    if isinstance(entries, np.ndarray):
        entries = entries.tolist()
    if isinstance(entries, (numbers.Number,)) or B.is_expr(entries):
        raise TinyadTypeError("ti.Vector / ti.Matrix need a list of entries", B.current_loc())
    out = []
    for e in entries:
        if isinstance(e, Matrix):
            out.append(list(e.entries))
        elif isinstance(e, (list, tuple, np.ndarray)):
            out.append(list(np.asarray(e).tolist()) if isinstance(e, np.ndarray) else list(e))
        else:
            out.append(e)
    return out


def _cast_entry(value, dt):
    """An entry converted to `dt`. A number becomes a numpy scalar of `dt`, so a kernel local
    made from it has that type: `ti.Vector.zero(ti.f64, 3)` under the default f32 is f64 (as a
    Python float it took the default, and PlasticineLab's f64 SVD gradient lost precision)."""
    if dt is None:
        return value
    dt = T.resolve_dtype(dt)     # Python's float / int name the default types, as in Taichi
    if B.is_expr(value):
        return B.cast(value, dt)
    return np.array(value).astype(dt.np)[()]     # (an int wraps, a float truncates, as casts do)


def _sum(values):
    return _reduce(lambda a, b: B.binary("add", a, b), list(values))


def entrywise(fn, a, b):
    """fn(a, b) on scalars; entry by entry where either is a matrix (a scalar on the other side
    goes with every entry, a list or array is a matrix of its shape)."""
    if isinstance(a, Matrix):
        return a._zip(b, fn)
    if isinstance(b, Matrix):
        return b._zip(a, fn, reflected=True)
    return fn(a, b)


def index_tuple(key) -> tuple:
    """An index as a tuple: `m[i, j]`'s, `v[i]`'s (one entry), or an index vector's entries."""
    if isinstance(key, Matrix):
        return tuple(key.entries)
    return key if isinstance(key, tuple) else (key,)


def _traced(value) -> bool:
    """Is `value` a kernel value: an IR expression, or a matrix holding one?"""
    if isinstance(value, Matrix):
        return any(B.is_expr(e) for e in value.entries)
    return B.is_expr(value)


def _reduce(fn, values):
    values = list(values)
    acc = values[0]
    for v in values[1:]:
        acc = fn(acc, v)
    return acc


def _dynamic_pick(index, entries, first=0):
    """entries[index] for an index known only at run time: a chain of selects, or for a long
    vector, a tree of them halving the range (a chain 1024 deep is deeper than Python
    recursion goes)."""
    if len(entries) > 8:
        half = len(entries) // 2
        return B.select(B.binary("lt", index, first + half),
                        _dynamic_pick(index, entries[:half], first),
                        _dynamic_pick(index, entries[half:], first + half))
    out = entries[-1]
    for k in range(len(entries) - 2, -1, -1):
        out = B.select(B.binary("eq", index, first + k), entries[k], out)
    return out


def _oob(key, shape):
    raise TinyadIndexError(f"index {key} is out of range for a matrix of shape {shape}",
                           B.current_loc())


class Vector(Matrix):
    """`ti.Vector([...])`: a Matrix with one index. (`ti.Vector.field` is given by field.py.)"""

    def __new__(cls, entries=None, dt=None, **kwargs):
        return Matrix(entries if entries is not None else [], dt=dt or kwargs.get("dtype"))

    @staticmethod
    def zero(dt, n):
        return Matrix.zero(dt, n)

    @staticmethod
    def one(dt, n):
        return Matrix.one(dt, n)


def entry_dtype(entries) -> T.DType | None:
    """The common dtype of traced entries (None when all are Python numbers)."""
    dtype = None
    for e in entries:
        if B.is_expr(e):
            dtype = e.dtype if dtype is None else T.promote(dtype, e.dtype)
    return dtype


def _entrywise(name: str, reflected: bool):
    def method(self, other):
        return self._zip(other, lambda a, b: B.binary(name, a, b), reflected)

    def compare(self, other):
        result = method(self, other)
        return result if _traced(result) else Comparison.of(result.to_numpy())
    return compare if TABLE[name].kind == "compare" else method


class Comparison(Matrix):
    """A Python-scope comparison of matrices, entry by entry as Taichi's (`(a == b).all()`),
    whose truth is that every entry holds: `assert v < 3` checks each entry (a plain Matrix
    is true whenever it has entries, so Taichi's passes whatever the values)."""

    @classmethod
    def of(cls, truths: np.ndarray) -> "Comparison":
        m = truths.shape[1] if truths.ndim == 2 else 1
        return cls._make([int(t) for t in truths.ravel()], truths.shape[0], m, truths.ndim)

    def __bool__(self):
        return all(self.entries)


def _install_operators():
    """Give matrices the Python operators the op table names (ops.dunder_operators), applied
    entry by entry with a scalar or a same-shaped matrix on the other side."""
    for dunder, name, reflected in dunder_operators():
        setattr(Matrix, dunder, _entrywise(name, reflected))


_install_operators()
