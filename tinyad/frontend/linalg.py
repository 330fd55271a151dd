"""Small dense linear algebra on Matrix values, unrolled at trace time (so differentiable)."""
from __future__ import annotations

import math

from tinyad.core import builder as B
from tinyad.core import types as T
from tinyad.core.errors import TinyadTypeError
from tinyad.frontend.matrix import Matrix


def determinant(a: Matrix):
    if a.ndim != 2 or a.n != a.m:
        raise TinyadTypeError(f"determinant needs a square matrix, got {a.shape}", B.current_loc())
    if a.n == 1:
        return a[0, 0]
    if a.n == 2:
        return a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]
    if a.n == 3:
        return (a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1])
                - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
                + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]))
    total = 0
    for j in range(a.n):  # Laplace expansion along the first row
        minor = Matrix([[a[i, k] for k in range(a.n) if k != j] for i in range(1, a.n)])
        term = a[0, j] * determinant(minor)
        total = total + term if j % 2 == 0 else total - term
    return total


def inverse(a: Matrix) -> Matrix:
    if a.ndim != 2 or a.n != a.m or a.n not in (1, 2, 3):
        raise TinyadTypeError(f"inverse is implemented for 1x1, 2x2 and 3x3 matrices, got "
                              f"{a.shape}", B.current_loc())
    inv_det = 1.0 / determinant(a)
    if a.n == 1:
        return Matrix([[inv_det]])
    if a.n == 2:
        return Matrix([[a[1, 1] * inv_det, -a[0, 1] * inv_det],
                       [-a[1, 0] * inv_det, a[0, 0] * inv_det]])
    cof = [[None] * 3 for _ in range(3)]
    for i in range(3):
        for j in range(3):
            r = [k for k in range(3) if k != i]
            c = [k for k in range(3) if k != j]
            minor = a[r[0], c[0]] * a[r[1], c[1]] - a[r[0], c[1]] * a[r[1], c[0]]
            cof[j][i] = minor * inv_det if (i + j) % 2 == 0 else -minor * inv_det
    return Matrix(cof)


# ---- polar decomposition and SVD ----------------------------------------------------------------
# Straight-line code: data-dependent choices are selects and loops run a fixed number of times, so
# the same code runs on numbers (Python scope) and traces into kernels, where reverse mode
# differentiates it like any other code. Where a branch would divide by zero or take sqrt(0), the
# select picks a safe *argument* first: the gradient of the branch not taken is multiplied by 0,
# and 0 * inf would be NaN.

_GAMMA = 3.0 + 2.0 * math.sqrt(2.0)   # (1 / tan(pi/8))^2: limit of the approximate Jacobi angle
_C_PI8, _S_PI8 = math.cos(math.pi / 8), math.sin(math.pi / 8)


class _Num:
    """Constants and shared values in the working precision, for numbers and traced values."""

    def __init__(self, a: Matrix, dt):
        self.traced = any(B.is_expr(e) for e in a.entries)
        self.dt = dt or T.typing_defaults().fp   # Taichi's default, whatever A's type

    def const(self, v):
        return B.cast(v, self.dt) if self.traced else float(v)

    def entries(self, a: Matrix):
        return [B.cast(e, self.dt) if self.traced else float(e) for e in a.entries]

    @staticmethod
    def let(v):
        return B.local(v, "svd")


def _square_check(a: Matrix, what: str):
    if a.ndim != 2 or a.n != a.m or a.n not in (2, 3):
        raise TinyadTypeError(f"{what} is implemented for 2x2 and 3x3 matrices, got {a.shape}",
                              B.current_loc())


def _guarded_rsqrt(x, ok, k: _Num):
    """rsqrt(x) where `ok`, else 1, with no inf on either side of the select."""
    return B.unary("rsqrt", B.select(ok, x, k.const(1)))


def _polar2(a, k: _Num):
    """Taichi's closed form: R rotates by the angle of (a00 + a11, a10 - a01); S = R^T A."""
    x, y = k.let(a[0] + a[3]), k.let(a[2] - a[1])
    n2 = x * x + y * y
    ok = n2 > 0                     # 0 only for A = [[p, q], [q, -p]], already symmetric: R = I
    inv = k.let(_guarded_rsqrt(n2, ok, k))
    c = k.let(B.select(ok, x * inv, k.const(1)))
    s = k.let(B.select(ok, y * inv, k.const(0)))
    r = [c, -s, s, c]
    sym = [k.let(c * a[0] + s * a[2]), k.let(c * a[1] + s * a[3]),
           k.let(c * a[2] - s * a[0]), k.let(c * a[3] - s * a[1])]
    return r, sym


def _svd2(a, k: _Num):
    """A = R S (polar), S = V diag(s1, s2) V^T with s1 >= s2 (s2 < 0 when det A < 0), U = R V."""
    r, sym = _polar2(a, k)
    p, b, q = sym[0], k.let(k.const(0.5) * (sym[1] + sym[2])), sym[3]
    d = p - q
    h2 = d * d + 4 * b * b
    root = B.unary("sqrt", B.select(h2 > 0, h2, k.const(1)))
    spread = k.let(B.select(h2 > 0, root, k.const(0)))   # s1 - s2
    mean, half = k.const(0.5) * (p + q), k.const(0.5) * spread
    s1, s2 = k.let(mean + half), k.let(mean - half)
    # V rotates by phi = atan2(2b, d) / 2. (cos phi, sin phi) is proportional to (h + d, 2b), or
    # to (2b, h - d), which keeps its precision when d < 0. The latter may be the negated vector:
    # then V and U = R V are both negated, still rotations, and A = U S V^T still holds.
    hx = B.select(d >= 0, spread + d, 2 * b)
    hy = B.select(d >= 0, 2 * b, spread - d)
    n2 = hx * hx + hy * hy
    ok = n2 > 0                     # 0 only for S = s I: any V works, take I
    inv = k.let(_guarded_rsqrt(n2, ok, k))
    c = k.let(B.select(ok, hx * inv, k.const(1)))
    s = k.let(B.select(ok, hy * inv, k.const(0)))
    v = [c, -s, s, c]
    u_mat = [k.let(r[0] * c + r[1] * s), k.let(r[1] * c - r[0] * s),
             k.let(r[2] * c + r[3] * s), k.let(r[3] * c - r[2] * s)]
    return u_mat, [s1, s2], v


def _jacobi_sweeps(a, k: _Num, sweeps: int):
    """The unit quaternion of V with V^T (A^T A) V nearly diagonal (McAdams et al. 2011).

    Each step rotates in one plane (p, q) by an approximate Jacobi angle, i.e. about the third
    axis ((p, q, axis) cyclic, so the rotation moves e_p towards e_q), and composes it into the
    quaternion."""
    s = [[None] * 3 for _ in range(3)]
    for i in range(3):
        for j in range(i, 3):
            s[i][j] = s[j][i] = k.let(a[i] * a[j] + a[3 + i] * a[3 + j] + a[6 + i] * a[6 + j])
    quat = [k.const(0), k.const(0), k.const(0), k.const(1)]   # x, y, z, w
    for _ in range(sweeps):
        for p, q, axis in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
            spp, sqq, spq = s[p][p], s[q][q], s[p][q]
            # Half-angle (ch, sh) ~ (2 (spp - sqq), spq): exact for small angles. When that
            # vector is steeper than pi/8, rotate by pi/4 instead, which still shrinks spq (but
            # not when spq is 0 already: then keep V as it is).
            ch, sh = k.let(2 * (spp - sqq)), spq
            small = k.const(_GAMMA) * sh * sh < ch * ch
            done = B.binary("eq", sh, 0)   # (`==` on a traced value is identity)
            inv = _guarded_rsqrt(ch * ch + sh * sh, small, k)
            ch = k.let(B.select(small, inv * ch, B.select(done, k.const(1), k.const(_C_PI8))))
            sh = k.let(B.select(small, inv * sh, B.select(done, k.const(0), k.const(_S_PI8))))
            c, sn = k.let(ch * ch - sh * sh), k.let(2 * ch * sh)   # cos, sin of the full angle
            # S <- Q^T S Q, Q the rotation by (c, sn) in the (p, q) plane
            cc, ss, cs = c * c, sn * sn, c * sn
            new_pp = k.let(cc * spp + 2 * cs * spq + ss * sqq)
            new_qq = k.let(ss * spp - 2 * cs * spq + cc * sqq)
            new_pq = k.let(cs * (sqq - spp) + (cc - ss) * spq)
            new_pk = k.let(c * s[p][axis] + sn * s[q][axis])
            new_qk = k.let(c * s[q][axis] - sn * s[p][axis])
            s[p][p], s[q][q] = new_pp, new_qq
            s[p][q] = s[q][p] = new_pq
            s[p][axis] = s[axis][p] = new_pk
            s[q][axis] = s[axis][q] = new_qk
            # quat <- quat * (sh e_axis, ch): V <- V Q
            x = quat
            new = list(x)
            new[p] = k.let(ch * x[p] + sh * x[q])
            new[q] = k.let(ch * x[q] - sh * x[p])
            new[axis] = k.let(ch * x[axis] + sh * x[3])
            new[3] = k.let(ch * x[3] - sh * x[axis])
            quat = new
    return quat


def _quat_to_matrix(quat, k: _Num):
    """Rotation matrix (row-major) of a quaternion, normalized first."""
    inv = B.unary("rsqrt", quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2]
                  + quat[3] * quat[3])
    x, y, z, w = (k.let(e * inv) for e in quat)
    return [k.let(1 - 2 * (y * y + z * z)), k.let(2 * (x * y - w * z)), k.let(2 * (x * z + w * y)),
            k.let(2 * (x * y + w * z)), k.let(1 - 2 * (x * x + z * z)), k.let(2 * (y * z - w * x)),
            k.let(2 * (x * z - w * y)), k.let(2 * (y * z + w * x)), k.let(1 - 2 * (x * x + y * y))]


def _svd3(a, k: _Num, sweeps: int):
    v = _quat_to_matrix(_jacobi_sweeps(a, k, sweeps), k)
    # B = A V has orthogonal columns; their lengths are the singular values.
    b = [k.let(a[3 * i] * v[j] + a[3 * i + 1] * v[3 + j] + a[3 * i + 2] * v[6 + j])
         for i in range(3) for j in range(3)]
    rho = [b[j] * b[j] + b[3 + j] * b[3 + j] + b[6 + j] * b[6 + j] for j in range(3)]
    # Sort columns by length, largest first. A swap negates one column, so det V stays +1 and
    # A V = B still holds.
    for i, j in ((0, 1), (0, 2), (1, 2)):
        swap = rho[i] < rho[j]
        for m in (b, v):
            for r in range(3):
                ci, cj = m[3 * r + i], m[3 * r + j]
                m[3 * r + i], m[3 * r + j] = k.let(B.select(swap, cj, ci)), \
                    k.let(B.select(swap, -ci, cj))
        rho[i], rho[j] = (k.let(B.select(swap, rho[j], rho[i])),
                          k.let(B.select(swap, rho[i], rho[j])))
    # QR of B by Givens rotations: B = U R, R upper triangular with orthogonal columns, so
    # diagonal up to the Jacobi residue. R's diagonal is sigma; only sigma_3 may be negative.
    u = [k.const(1 if i == j else 0) for i in range(3) for j in range(3)]
    for p, q in ((0, 1), (0, 2), (1, 2)):
        top, low = b[3 * p + p], b[3 * q + p]
        n2 = top * top + low * low
        ok = n2 > 0
        inv = k.let(_guarded_rsqrt(n2, ok, k))
        c = k.let(B.select(ok, top * inv, k.const(1)))
        sn = k.let(B.select(ok, low * inv, k.const(0)))
        for col in range(3):   # rows p, q of B <- Q^T B; columns p, q of U <- U Q
            bp, bq = b[3 * p + col], b[3 * q + col]
            b[3 * p + col], b[3 * q + col] = k.let(c * bp + sn * bq), k.let(c * bq - sn * bp)
            up, uq = u[3 * col + p], u[3 * col + q]
            u[3 * col + p], u[3 * col + q] = k.let(c * up + sn * uq), k.let(c * uq - sn * up)
    return u, [b[0], b[4], b[8]], v


def _sweeps(k: _Num) -> int:
    # Measured: 5 sweeps reach f32 precision on random matrices, 6 reach f64's; near-equal
    # singular values converge slower, so f64 gets a margin. Python scope computes in f64.
    return 5 if k.traced and k.dt.bits <= 32 else 8


def _diag(values, k: _Num):
    n = len(values)
    return Matrix([[values[i] if i == j else k.const(0) for j in range(n)] for i in range(n)])


def _mat(entries, n):
    return Matrix([entries[i * n:(i + 1) * n] for i in range(n)])


def svd(A: Matrix, dt=None):
    """`ti.svd`: (U, S, V) with A = U @ S @ V.T, U and V rotations, S diagonal with its entries
    in decreasing order; the last one is negative when det(A) < 0 (as in Taichi)."""
    _square_check(A, "svd")
    k = _Num(A, dt)
    a = k.entries(A)
    if A.n == 2:
        u, sigma, v = _svd2(a, k)
    else:
        u, sigma, v = _svd3(a, k, _sweeps(k))
    return _mat(u, A.n), _diag(sigma, k), _mat(v, A.n)


def polar_decompose(A: Matrix, dt=None):
    """`ti.polar_decompose`: (U, P) with A = U @ P, U a rotation and P symmetric."""
    _square_check(A, "polar_decompose")
    k = _Num(A, dt)
    a = k.entries(A)
    if A.n == 2:
        r, sym = _polar2(a, k)
        return _mat(r, 2), _mat(sym, 2)
    u, sigma, v = _svd3(a, k, _sweeps(k))
    # U_svd V^T is a rotation; V S V^T is computed once per pair so P is exactly symmetric
    rot = [k.let(sum((u[3 * i + m] * v[3 * j + m] for m in range(1, 3)), u[3 * i] * v[3 * j]))
           for i in range(3) for j in range(3)]
    sym = [None] * 9
    for i in range(3):
        for j in range(i, 3):
            sym[3 * i + j] = sym[3 * j + i] = k.let(
                sum((v[3 * i + m] * sigma[m] * v[3 * j + m] for m in range(1, 3)),
                    v[3 * i] * sigma[0] * v[3 * j]))
    return _mat(rot, 3), _mat(sym, 3)
