"""`ti.*` / `ti.math.*` math functions. Each works on numbers (Python scope), on traced scalars
and, element-wise, on vectors and matrices."""
from __future__ import annotations

import math as _pymath

from tinyad.core import builder as B
from tinyad.frontend import lang
from tinyad.frontend.matrix import Matrix

pi = _pymath.pi
e = _pymath.e
inf = _pymath.inf
nan = _pymath.nan


def _elementwise(name):
    def op(x):
        if isinstance(x, Matrix):
            return x.map(lambda v: B.unary(name, v))
        return B.unary(name, x)
    op.__name__ = name
    op.__doc__ = f"`{name}` of a scalar, or of every entry of a vector or matrix."
    return op


def _elementwise2(name):
    def op(a, b):
        if isinstance(a, Matrix):
            return a._zip(b, lambda u, v: B.binary(name, u, v))
        if isinstance(b, Matrix):
            return b._zip(a, lambda u, v: B.binary(name, u, v), reflected=True)
        return B.binary(name, a, b)
    op.__name__ = name
    return op


sin, cos, tan = _elementwise("sin"), _elementwise("cos"), _elementwise("tan")
asin, acos, atan = _elementwise("asin"), _elementwise("acos"), _elementwise("atan")
exp, log, sqrt, rsqrt = _elementwise("exp"), _elementwise("log"), _elementwise("sqrt"), _elementwise("rsqrt")
tanh = _elementwise("tanh")
_floor_op, _ceil_op, _round_op = _elementwise("floor"), _elementwise("ceil"), _elementwise("round")
atan2 = _elementwise2("atan2")
pow = _elementwise2("pow")  # noqa: A001  (Taichi's name)
_min2, _max2 = _elementwise2("min"), _elementwise2("max")


def _with_dtype(op, x, dtype):
    value = op(x)
    if dtype is None:
        return value
    from tinyad.frontend.lang import cast  # noqa: PLC0415
    return cast(value, dtype)


def floor(x, dtype=None):
    return _with_dtype(_floor_op, x, dtype)


def ceil(x, dtype=None):
    return _with_dtype(_ceil_op, x, dtype)


def round(x, dtype=None):  # noqa: A001
    return _with_dtype(_round_op, x, dtype)


def abs(x):  # noqa: A001
    return x.map(lambda v: B.unary("abs", v)) if isinstance(x, Matrix) else B.unary("abs", x)


def min(*args):  # noqa: A001
    out = args[0]
    for a in args[1:]:
        out = _min2(out, a)
    return out


def max(*args):  # noqa: A001
    out = args[0]
    for a in args[1:]:
        out = _max2(out, a)
    return out


def clamp(x, lo, hi):
    return min(max(x, lo), hi)


def mix(x, y, a):
    return x * (1 - a) + y * a


def sign(x):
    if isinstance(x, Matrix):
        return x.map(sign)
    return B.select(B.binary("gt", x, 0), 1.0, B.select(B.binary("lt", x, 0), -1.0, 0.0))


def log2(x):
    return log(x) / _pymath.log(2.0)


def dot(a, b):
    return a.dot(b)


def cross(a, b):
    return a.cross(b)


def length(v):
    return v.norm()


def normalize(v):
    return v.normalized()


def determinant(m):
    return m.determinant()


def inverse(m):
    return m.inverse()


def _vector_type(n):
    # a type, as in Taichi: callable to make a vector, and usable as an ndarray's or a kernel
    # argument's type
    return lang.VectorType(n, None)


def _matrix_type(n):
    return lang.MatrixType(n, n, None)


vec2, vec3, vec4 = _vector_type(2), _vector_type(3), _vector_type(4)
mat2, mat3, mat4 = _matrix_type(2), _matrix_type(3), _matrix_type(4)
ivec2, ivec3, ivec4 = vec2, vec3, vec4

__all__ = ["pi", "e", "inf", "nan", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "exp",
           "log", "log2", "sqrt", "rsqrt", "tanh", "pow", "floor", "ceil", "round", "abs", "min",
           "max", "clamp", "mix", "sign", "dot", "cross", "length", "normalize", "determinant",
           "inverse", "vec2", "vec3", "vec4", "mat2", "mat3", "mat4", "ivec2", "ivec3", "ivec4"]
