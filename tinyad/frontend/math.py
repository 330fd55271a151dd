"""`ti.*` / `ti.math.*` math functions. Each works on numbers (Python scope), on traced scalars
and, element-wise, on vectors and matrices."""
from __future__ import annotations

import math as _pymath

from tinyad.core import builder as B
from tinyad.core import types as T
from tinyad.core.errors import TinyadTypeError
from tinyad.frontend import lang
from tinyad.frontend.matrix import Matrix, entrywise

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
        return entrywise(lambda u, v: B.binary(name, u, v), a, b)
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


# ---- GLSL-style helpers, as Taichi's ti.math defines them ------------------------------------
_ge, _eq = _elementwise2("ge"), _elementwise2("eq")


def step(edge, x):
    """1.0 where x >= edge, else 0.0, element-wise."""
    return lang.cast(_ge(x, edge), float)


def fract(x):
    """x - floor(x), element-wise."""
    return x - floor(x)


def smoothstep(edge0, edge1, x):
    """Hermite interpolation from 0 at edge0 to 1 at edge1, clamped, element-wise."""
    t = clamp((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def mod(x, y):
    """x - y * floor(x / y), element-wise (the sign of y, as GLSL's)."""
    return x - y * floor(x / y)


def degrees(x):
    return x * (180.0 / pi)


def radians(x):
    return x * (pi / 180.0)


def distance(x, y):
    difference = x - y
    return difference.norm() if isinstance(difference, Matrix) else abs(difference)


def reflect(x, n):
    """x reflected about the plane of normal n (n of length 1): x - 2 (x . n) n."""
    return x - 2.0 * x.dot(n) * n


def refract(x, n, eta):
    """The refraction of x through the surface of normal n for the ratio of indices eta, or the
    zero vector where it is totally reflected. (The root is taken of 1 there, not of a negative
    number, so that its zero gradient stays zero, not NaN.)"""
    dxn = x.dot(n)
    k = 1.0 - eta * eta * (1.0 - dxn * dxn)
    refracts = _ge(k, 0.0)
    root = sqrt(lang.select(refracts, k, 1.0))
    return lang.select(refracts, eta * x - (eta * dxn + root) * n, 0.0)


def isnan(x):
    """1 where x is NaN, else 0, element-wise (not x == x: `!=` is false on a NaN, as in
    Taichi)."""
    return 1 - _eq(x, x)


def isinf(x):
    """1 where x is +inf or -inf, else 0, element-wise."""
    return _eq(abs(x), inf)


def eye(n):
    """The n x n identity matrix (float)."""
    return Matrix.identity(float, n)


def vdir(angle):
    """The 2-D unit vector at this angle."""
    return Matrix([cos(angle), sin(angle)])


def rotation2d(angle):
    """The 2 x 2 counter-clockwise rotation by `angle` (radians)."""
    return Matrix.rotation2d(angle)


def rot_yaw_pitch_roll(yaw, pitch, roll):
    """The 4 x 4 homogeneous rotation by Euler angles (about Y, then X, then Z), as Taichi's."""
    ch, sh, cp, sp, cb, sb = cos(yaw), sin(yaw), cos(pitch), sin(pitch), cos(roll), sin(roll)
    return Matrix([[ch * cb + sh * sp * sb, sb * cp, -sh * cb + ch * sp * sb, 0.0],
                   [-ch * sb + sh * sp * cb, cb * cp, sb * sh + ch * sp * cb, 0.0],
                   [sh * cp, -sp, ch * cp, 0.0],
                   [0.0, 0.0, 0.0, 1.0]])


def rotation3d(ang_x, ang_y, ang_z):
    return rot_yaw_pitch_roll(ang_z, ang_x, ang_y)


def rot_by_axis(axis, angle):
    """The 4 x 4 homogeneous rotation by `angle` about `axis`, as Taichi's."""
    c, s = cos(angle), sin(angle)
    a = axis.normalized()
    t = (1 - c) * a
    return Matrix([[c + t[0] * a[0], t[0] * a[1] + s * a[2], t[0] * a[2] - s * a[1], 0.0],
                   [t[1] * a[0] - s * a[2], c + t[1] * a[1], t[1] * a[2] + s * a[0], 0.0],
                   [t[2] * a[0] + s * a[1], t[2] * a[1] - s * a[0], c + t[2] * a[2], 0.0],
                   [0.0, 0.0, 0.0, 1.0]])


def translate(dx, dy, dz):
    return Matrix([[1.0, 0.0, 0.0, dx], [0.0, 1.0, 0.0, dy], [0.0, 0.0, 1.0, dz],
                   [0.0, 0.0, 0.0, 1.0]])


def scale(sx, sy, sz):
    return Matrix([[sx, 0.0, 0.0, 0.0], [0.0, sy, 0.0, 0.0], [0.0, 0.0, sz, 0.0],
                   [0.0, 0.0, 0.0, 1.0]])


def _vector_type(n, dtype=float):
    # a type, as in Taichi: callable to make a vector, and usable as an ndarray's or a kernel
    # argument's type. `float` is default_fp, whatever ti.init set: vec3(1, 2, 3) is a float
    # vector, so a /= 2 keeps its halves
    return lang.VectorType(n, dtype)


def _matrix_type(n):
    return lang.MatrixType(n, n, float)


vec2, vec3, vec4 = _vector_type(2), _vector_type(3), _vector_type(4)
mat2, mat3, mat4 = _matrix_type(2), _matrix_type(3), _matrix_type(4)
# Taichi's integer vectors (ivec2(3.7, 2) is [3, 2], an index): entries of default_ip, and of
# the unsigned type as wide (i32 and u32 unless ti.init(default_ip=ti.i64)), as in Taichi 1.7.4
ivec2, ivec3, ivec4 = (_vector_type(n, int) for n in (2, 3, 4))
uvec2, uvec3, uvec4 = (_vector_type(n, T.DEFAULT_UNSIGNED) for n in (2, 3, 4))

__all__ = ["pi", "e", "inf", "nan", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "exp",
           "log", "log2", "sqrt", "rsqrt", "tanh", "pow", "floor", "ceil", "round", "abs", "min",
           "max", "clamp", "mix", "sign", "dot", "cross", "length", "normalize", "determinant",
           "inverse", "vec2", "vec3", "vec4", "mat2", "mat3", "mat4", "ivec2", "ivec3", "ivec4",
           "uvec2", "uvec3", "uvec4",
           "step", "fract", "smoothstep", "mod", "degrees", "radians", "distance", "reflect",
           "refract", "isnan", "isinf", "eye", "vdir", "rotation2d", "rotation3d",
           "rot_yaw_pitch_roll", "rot_by_axis", "translate", "scale"]


def randn(dt=None):
    """A draw from the standard normal distribution (mean 0, variance 1), by the Box-Muller
    transform of two `ti.random()` draws, as Taichi's `ti.randn` (in Python scope, from the
    same generator as Python-scope `ti.random()`)."""
    dtype = float if dt is None else dt
    if not T.resolve_dtype(dtype).is_float:
        raise TinyadTypeError(f"ti.randn draws floats: dt={dt} (f32 or f64, or none for "
                              "default_fp)", B.current_loc())
    if B.current_loc().line == 0:  # Python scope
        u1, u2 = 1.0 - lang.random(dtype), lang.random(dtype)
        return _pymath.sqrt(-2 * _pymath.log(u1)) * _pymath.cos(_pymath.tau * u2)
    u1 = B.binary("sub", B.cast(1.0, T.resolve_dtype(dtype)), lang.random(dtype))
    u2 = lang.random(dtype)
    return B.binary("mul", sqrt(B.binary("mul", -2.0, log(u1))),
                    cos(B.binary("mul", _pymath.tau, u2)))
