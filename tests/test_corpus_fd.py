"""A corpus of small kernels, each gradient checked against central finite differences (f64).

Each case is a builder: it declares its fields (inputs and the 0-D loss with needs_grad=True),
defines its kernel(s), fills the inputs from a fixed-seed rng in a safe domain (positive for
log/sqrt, |x| < 1 for asin/acos, away from ties, kinks and jumps), and returns a `Built`. The
test differentiates `run` with ti.ad.Tape -- or, for cases with `manual`, the Taichi way by hand:
run(); loss.grad[None] = 1; kernel.grad() -- and compares every param's .grad with
finite_difference(). Top-level definitions are separated by one blank line, for compactness.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from gradcheck import finite_difference

import tinyad as ti

N = 5
RNG = np.random.default_rng(0)   # re-seeded before every case
# Comparisons, floor, int casts... inside differentiable expressions are used on purpose here.
pytestmark = pytest.mark.filterwarnings("ignore::tinyad.NonDifferentiableWarning")

@dataclass
class Built:
    run: Callable            # the forward pass: launches the kernel(s), accumulates into loss
    loss: object             # the 0-D loss field
    params: list             # fields whose .grad is checked
    manual: Callable | None = None   # if set: the adjoint kernels, called by hand after run()
    eps: float = 1e-6
    rtol: float = 1e-6
    atol: float = 1e-8

CASES = []

def case(name, xfail=None):
    def register(builder):
        marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
        CASES.append(pytest.param(builder, id=name, marks=marks))
        return builder
    return register

def inp(shape=N, lo=-1.0, hi=1.0, *, vec=None, mat=None, signed=False, values=None):
    """An input field with needs_grad, filled with uniform values in [lo, hi] (or `values`);
    `signed`: magnitudes in [lo, hi] with random signs (keeps away from 0 for abs, 1/x, ...)."""
    if mat is not None:
        f = ti.Matrix.field(mat[0], mat[1], ti.f64, shape=shape, needs_grad=True)
    elif vec is not None:
        f = ti.Vector.field(vec, ti.f64, shape=shape, needs_grad=True)
    else:
        f = ti.field(ti.f64, shape=shape, needs_grad=True)
    full = tuple(f.shape) + tuple(f.element_shape)
    if values is None:
        values = RNG.uniform(lo, hi, size=full)
        if signed:
            values *= RNG.choice([-1.0, 1.0], size=full)
    f.from_numpy(np.asarray(values, dtype=np.float64).reshape(full))
    return f

def scalar_loss():
    return ti.field(ti.f64, shape=(), needs_grad=True)

# Input specs for `elementwise` cases (called once ti.init has run): scalar, fixed values,
# vector, matrix, and well-conditioned I + U(-0.3, 0.3) matrix fields.
def S(lo=-1.0, hi=1.0, signed=False):
    return lambda: inp(lo=lo, hi=hi, signed=signed)
def F(*values):
    return lambda: inp(values=values)
def V(n, lo=-1.0, hi=1.0, signed=False):
    return lambda: inp(lo=lo, hi=hi, signed=signed, vec=n)
def M(n, m):
    return lambda: inp(mat=(n, m))
def near_identity(n):
    return lambda: inp(values=np.eye(n) + RNG.uniform(-0.3, 0.3, size=(N, n, n)), mat=(n, n))

def elementwise(name, *specs, xfail=None, manual=False, **options):
    """Register a case whose loss is sum_i f(a[i], b[i], c[i]) for a @ti.func f(a, b, c): one
    input field per spec (scalar, vector or matrix); the missing ones are zero fields.
    `manual`: differentiate by hand with k.grad() instead of a Tape."""
    def register(f):
        def build():
            params = [spec() for spec in specs]
            a, b, c = params + [ti.field(ti.f64, shape=N) for _ in range(3 - len(params))]
            loss = scalar_loss()
            @ti.kernel
            def k():
                for i in a:
                    loss[None] += f(a[i], b[i], c[i])
            return Built(k, loss, params, manual=k.grad if manual else None, **options)
        case(name, xfail)(build)
        return f
    return register


# ---- every differentiable scalar op ---------------------------------------------------------
UNARY = [  # (id, op, lo, hi, signed)
    ("sin", ti.sin, -2.0, 2.0, False), ("cos", ti.cos, -2.0, 2.0, False),
    ("tan", ti.tan, -1.2, 1.2, False), ("asin", ti.asin, -0.9, 0.9, False),
    ("acos", ti.acos, -0.9, 0.9, False), ("exp", ti.exp, -1.5, 1.5, False),
    ("log", ti.log, 0.2, 3.0, False), ("sqrt", ti.sqrt, 0.2, 3.0, False),
    ("rsqrt", ti.rsqrt, 0.2, 3.0, False), ("tanh", ti.tanh, -2.0, 2.0, False),
    ("abs", ti.abs, 0.2, 1.0, True),
]

def _unary_case(op, lo, hi, signed):
    def build():
        x, w, loss = inp(lo=lo, hi=hi, signed=signed), inp(), scalar_loss()
        @ti.kernel
        def k():
            for i in x:
                loss[None] += w[i] * op(x[i]) + op(x[i]) ** 2
        return Built(k, loss, [x, w])
    return build

for _name, _op, _lo, _hi, _signed in UNARY:
    case(f"unary-{_name}")(_unary_case(_op, _lo, _hi, _signed))

@case("arith-on-loads-several-fields")
def _():
    x, y, z, loss = inp(), inp(lo=0.5, hi=1.5), inp(), scalar_loss()
    @ti.kernel
    def k():
        for i in x:
            loss[None] += (x[i] * y[i] - x[i] / y[i] + (x[i] + z[i]) * x[i] - y[i] + 2.0 / y[i]
                           + z[i] * y[(i + 1) % N])
    return Built(k, loss, [x, y, z])

@elementwise("neg", S(), S())
@ti.func
def _(a, b, c):
    t = -a
    return -(t * t * t) + (-b) * t - (-(a * b))

@elementwise("pow-int-exponents", S(0.5, 1.5, signed=True), S())
@ti.func
def _(a, b, c):
    return a ** 3 + a ** -2 + b ** 2 * a ** 1 + (a * b) ** 4

@elementwise("pow-float-exponents", S(0.4, 2.0))
@ti.func
def _(a, b, c):
    return a ** 2.5 + a ** 0.5 - a ** -1.5 + 2.0 ** a

@elementwise("pow-field-field", S(0.4, 2.0), S(-1.0, 2.0))
@ti.func
def _(a, b, c):
    return a ** b + ti.pow(b + 2.0, a)

@elementwise("atan2", S(0.2, 1.0, signed=True), S())
@ti.func
def _(a, b, c):
    return ti.atan2(a, b) * (1.0 + b) + ti.atan2(b, 2.0)

@elementwise("min-max-2-and-3-args-and-builtins", S(), S(), S())
@ti.func
def _(a, b, c):
    return (ti.min(a, b) * 2.0 + ti.max(a, b) ** 2 + ti.max(a, 0.1)
            + ti.max(a, b, c) * ti.min(a, b * 0.5, c ** 2) + max(a, c) - min(b, 0.3) * a)

@elementwise("select", S(), S())
@ti.func
def _(a, b, c):
    return ti.select(a > b, a * b, ti.sin(a) - b ** 2)

@elementwise("ternary-expression", S(), S())
@ti.func
def _(a, b, c):
    t = a ** 2 if a > 0.0 else -a * b
    return t * b + (ti.exp(b) if b < a else b * 3.0)

# f32 rounding: a larger step and a looser tolerance (the loss is quadratic: no truncation error)
@elementwise("cast-f32-f64", S(), S(), eps=1e-3, rtol=1e-4, atol=1e-5)
@ti.func
def _(a, b, c):
    t = ti.cast(ti.cast(a, ti.f32), ti.f64)
    return t * t * b + ti.cast(b, ti.f32) * 2.0

@elementwise("dtype-call-cast", S(), S(), eps=1e-3, rtol=1e-4, atol=1e-5)
@ti.func
def _(a, b, c):
    return ti.f64(ti.f32(a)) * b + ti.i32(a * 3.0 + 4.0) * b + ti.f64(a * b) ** 2

# fractional parts away from 0 and 0.5, 3a away from integers: no jump within eps
@elementwise("nondiff-floor-ceil-round-int-compare", F(0.15, 1.3, -0.7, 2.2, -1.85),
             F(0.4, -0.3, 0.9, 1.7, -0.2))
@ti.func
def _(a, b, c):
    return (a * ti.floor(a) + ti.ceil(a) * b + ti.round(a) * a * b + ti.cast(a * 3.0, ti.i32) * a
            + int(a) * b + (a > 0.5) * a ** 2 + ti.cast(a >= b, ti.f64) * b
            + (a - ti.floor(a)) ** 2)

@elementwise("local-reassign-and-augassign", S(0.5, 1.5), S())
@ti.func
def _(a, b, c):
    t = a * b
    t = ti.sin(t) + a
    if b > 0.0:
        t = ti.exp(t) * b
    t += b * t
    t *= a
    t -= b ** 2
    t /= 1.5 + b
    return t * t

# ---- control flow ---------------------------------------------------------------------------
@elementwise("if-elif-else", F(0.9, 0.1, -0.6, 0.7, -0.05), S())
@ti.func
def _(a, b, c):
    t = 0.0
    if a > 0.5:
        t = ti.sin(a) * b
    elif a > -0.2:
        t = a * a * b
    else:
        t = ti.exp(a) - b
    return t

@case("nested-if-on-loads")
def _():
    x, y, loss = inp(), inp(), scalar_loss()
    @ti.kernel
    def k():
        for i in x:
            if x[i] > 0:
                if y[i] > 0:
                    loss[None] += x[i] * y[i]
                else:
                    loss[None] += x[i] ** 2 - y[i]
            else:
                if y[i] > x[i]:
                    loss[None] += ti.cos(x[i] + y[i])
                loss[None] += x[i] * 0.5
    return Built(k, loss, [x, y])

@case("if-inside-inner-loop")
def _():
    x, y, loss = inp(), inp(), scalar_loss()
    @ti.kernel
    def k():
        for i in x:
            acc = 0.0
            for j in range(N):
                if x[j] > x[i]:
                    acc += x[j] * y[i]
                else:
                    acc -= ti.sin(x[j]) * acc * 0.5
            loss[None] += acc ** 2
    return Built(k, loss, [x, y])

@elementwise("conditional-overwrite-in-loop", S(), S())
@ti.func
def _(a, b, c):
    v = a
    for j in range(6):
        if v > 0.2:
            v = v * 0.7 + 0.1 * b * j
        else:
            v = v + 0.3 * ti.cos(v)
    return v * a

# ---- loops ----------------------------------------------------------------------------------
@case("struct-for-2d")
def _():
    x, loss = inp((3, 4)), scalar_loss()
    @ti.kernel
    def k():
        for i, j in x:
            loss[None] += x[i, j] * ti.cos(x[i, j]) * (i + 1) - j * x[i, j] ** 2
    return Built(k, loss, [x])

@case("range-for-and-ndrange-offsets-1d")
def _():
    x, loss = inp(7), scalar_loss()
    @ti.kernel
    def k():
        for i in range(7):
            loss[None] += x[i] * x[(i + 1) % 7] + ti.sin(x[i]) * i
        for i in ti.ndrange((1, 7 - 1)):
            loss[None] += (x[i - 1] - 2.0 * x[i] + x[i + 1]) ** 2
    return Built(k, loss, [x])

@case("ndrange-offsets-2d")
def _():
    x, loss = inp((4, 5)), scalar_loss()
    @ti.kernel
    def k():
        for i, j in ti.ndrange((1, 4 - 1), (1, 5 - 1)):
            lap = x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1] - 4.0 * x[i, j]
            loss[None] += lap ** 2 + x[i, j] * j
    return Built(k, loss, [x])

@case("grouped")
def _():
    x, loss = inp((3, 4)), scalar_loss()
    @ti.kernel
    def k():
        for I in ti.grouped(x):
            loss[None] += x[I] ** 2 * (I[0] + 2 * I[1] + 1)
        for I in ti.grouped(ti.ndrange(3, (1, 4))):
            loss[None] += ti.sin(x[I] * x[I[0], I[1] - 1])
    return Built(k, loss, [x])

@case("inner-serial-loop-accumulator")
def _():
    x, y, loss = inp(), inp(), scalar_loss()
    @ti.kernel
    def k():
        for i in x:
            s = 0.0
            for j in range(N):
                s += x[j] * ti.sin(x[i] + y[j])
            loss[None] += s ** 2
    return Built(k, loss, [x, y])

@elementwise("nonlinear-carry-120-iterations", S(), S())
@ti.func
def _(a, b, c):
    v = 0.0
    for _ in range(120):
        v = ti.sin(v) * 0.9 + a
    return v * b

@elementwise("nonlinear-carry-150-iterations-two-locals", S(), S())
@ti.func
def _(a, b, c):
    for _ in range(150):
        t = a * 0.99 + 0.02 * ti.cos(b)
        b = b * 0.98 + 0.03 * ti.tanh(a * b)
        a = t
    return a * b + a

@elementwise("loop-body-local-read-nonlinearly", S())
@ti.func
def _(a, b, c):
    v = a
    for _ in range(20):
        t = v * 0.5 + 0.3
        v = ti.sin(t) * t + a * 0.1
    return v

@elementwise("nested-serial-loops-two-levels-carry", S(), S())
@ti.func
def _(a, b, c):
    v = 0.1
    for j in range(3):
        for m in range(4):
            v = v * 0.8 + ti.sin(a * j + m * v) * 0.3
        v = v + b * j * 0.1
    return v * a

@elementwise("vector-locals-carried-100-iterations", V(2), V(2), S(0.5, 1.5))
@ti.func
def _(a, b, c):
    p, v = a, b
    for _ in range(100):
        v = v * 0.99 - p * (0.01 * c) + 0.01 * ti.Vector([ti.sin(p[1]), 0.0])
        p = p + 0.01 * v
    return p.norm_sqr() + v[0] * p[1]

@case("serialized-outer-loop-carry")
def _():
    x, y, loss = inp(), inp(), scalar_loss()
    @ti.kernel
    def k():
        v = 0.5
        ti.loop_config(serialize=True)
        for i in range(N):
            v = v * ti.sin(x[i]) + y[i] * v + x[i]
        loss[None] = v
    return Built(k, loss, [x, y])

@case("inner-bounds-depend-on-outer-index")
def _():
    x, y, loss = inp(), inp(), scalar_loss()
    @ti.kernel
    def k():
        for i in x:
            s = 0.0
            for j in range(i + 1):
                s += x[j] * y[i - j]
            for j in range(i, N):
                loss[None] += x[i] * ti.cos(x[j])
            loss[None] += s * s
    return Built(k, loss, [x, y])

@case("toplevel-serial-and-parallel-loop")
def _():
    x, loss = inp(), scalar_loss()
    @ti.kernel
    def k():
        s = x[0] * 2.0 + ti.sin(x[1])
        loss[None] = s ** 2
        for i in x:
            loss[None] += s * x[i] ** 2
        loss[None] += x[2] * s
        s = s * s + ti.cos(x[3])   # overwritten between two parallel loops that read it
        for i in x:
            loss[None] += s * ti.sin(x[i])
    return Built(k, loss, [x])

@case("two-parallel-loops-one-kernel-via-field")
def _():
    x, loss, y = inp(), scalar_loss(), ti.field(ti.f64, shape=N, needs_grad=True)
    @ti.kernel
    def k():
        for i in x:
            if x[i] > 0.0:
                y[i] = x[i] ** 2
            else:
                y[i] = ti.sin(x[i])
        for i in y:
            loss[None] += y[i] * y[(i + 1) % N] + y[i]
    return Built(k, loss, [x])

# ---- ti.static, @ti.func --------------------------------------------------------------------
@case("static-for-unrolled")
def _():
    v, c, loss = inp(vec=3), inp(4), scalar_loss()
    @ti.kernel
    def k():
        for i in v:
            for d in ti.static(range(3)):
                loss[None] += v[i][d] * c[d] ** 2
            for a, b in ti.static(ti.ndrange(2, 2)):
                loss[None] += v[i][a] * v[i][b + 1] * c[a + b]
    return Built(k, loss, [v, c])

@case("static-if-closure-and-template")
def _():
    x, loss = inp(), scalar_loss()
    use_sin = True
    @ti.kernel
    def k(flag: ti.template()):
        for i in x:
            if ti.static(use_sin):
                loss[None] += ti.sin(x[i])
            if ti.static(flag == 1):
                loss[None] += x[i] ** 3
            else:
                loss[None] += ti.exp(x[i]) * 0.5
    return Built(lambda: (k(1), k(0)), loss, [x])

@ti.func
def _affine_sin(a, b):
    return a * ti.sin(b) + b

@ti.func
def _twice(a, b):
    return _affine_sin(a, b) * _affine_sin(b, a)

@ti.func
def _piecewise(a):
    if a > 0.0:
        return a * a
    return -ti.sin(a)

@ti.func
def _rotate(v, c):
    return ti.Vector([v[0] * c - v[1], v[1] * c + v[0]])

@case("func-on-loads-return-value")
def _():
    x, y, loss = inp(), inp(), scalar_loss()
    @ti.kernel
    def k():
        for i in x:
            loss[None] += _affine_sin(x[i], y[i]) - _affine_sin(y[i], 0.5)
    return Built(k, loss, [x, y])

@elementwise("func-calls-func", S(), S())
@ti.func
def _(a, b, c):
    return _twice(a, b) + _affine_sin(_twice(b, a), a)

@ti.func
def _nested_returns(a, b):
    if a > 0:
        if b > 0:
            return a * b
        return a - b
    return ti.sin(a + b)

@ti.func
def _vector_returns(v, c):
    if c > 0:
        return v * c
    return v * 2.0

@elementwise("func-early-return", S(0.2, 1.0, signed=True), V(2), S())
@ti.func
def _(a, b, c):
    s = a
    for j in range(4):   # inlined into a serial loop: the result local is saved per iteration
        s = _nested_returns(s, c * j - 0.5) * 0.7 + 0.1
    return _piecewise(a) * a + _piecewise(a * 0.5 - 0.05) + _vector_returns(b, c).norm_sqr() + s

@elementwise("func-vector-valued", V(2), S())
@ti.func
def _(a, b, c):
    q = _rotate(a, b)
    return q.norm_sqr() + q[1] * b + _rotate(q, 0.5).dot(a)

# ---- vectors and matrices -------------------------------------------------------------------
@elementwise("vec-dot-cross-3d-norm-sqr", V(3), V(3), V(3))
@ti.func
def _(a, b, c):
    w = a.cross(b)
    return w.dot(c) + w[2] ** 2 + a.dot(b) * a.norm_sqr() + b[0] * a.y

@elementwise("vec-norm-eps-normalized", V(3, 0.3, 1.0, signed=True), V(3))
@ti.func
def _(a, b, c):
    return a.norm(1e-6) + a.normalized().dot(b) + a.norm() * b.x

@elementwise("vec-outer-transpose-trace", V(3), V(3))
@ti.func
def _(a, b, c):
    m = a.outer_product(b)
    return (m @ m.transpose()).trace() + m[1, 0] + m.T[1, 0] * 2.0

@elementwise("vec-local-construction-elementwise", S(), S(), V(3))
@ti.func
def _(a, b, c):
    w = ti.Vector([a, b, a * b])
    u = w * c + 2.0 * w - c / 3.0
    return ti.exp(u).dot(ti.sin(w)) + (w ** 2).sum() + abs(u[2] - 5.0)

@elementwise("vec-select-min-max-elementwise", V(3), V(3))
@ti.func
def _(a, b, c):
    return (ti.select(a > b, a * b, b - a) + ti.max(a, b * 0.5) - ti.min(a, 0.2)).norm_sqr()

@elementwise("vec-component-assignment", V(3), S())
@ti.func
def _(a, b, c):
    w = a * 1.0
    w[0] = w[0] * b
    w[1] += ti.sin(w[0])
    w.z = w[1] * w[2]
    return w.sum() + w.norm_sqr()

@case("vec-dynamic-component-index")
def _():
    v, x, loss = inp(vec=3), inp(), scalar_loss()
    @ti.kernel
    def k():
        for i in v:
            w = v[i] * x[i]
            for j in range(3):
                w[j] = ti.sin(w[j]) + w[(j + 1) % 3]
            for j in range(3):
                loss[None] += w[j] * v[i][j] + v[(i + 1) % N][j] ** 2
    return Built(k, loss, [v, x])

@elementwise("mat-determinant-2x2-3x3", M(2, 2), M(3, 3), S())
@ti.func
def _(a, b, c):
    d = a.determinant()
    return d * c + d ** 2 + b.determinant() + b.determinant() ** 2 * 0.5

@elementwise("mat-inverse-2x2-3x3", near_identity(2), near_identity(3), V(3))
@ti.func
def _(a, b, c):
    inv2, inv3 = a.inverse(), b.inverse()
    return ((inv3 @ c).norm_sqr() + inv3.trace() + (inv2 @ ti.Vector([c[0], c[1]])).sum()
            + inv2[0, 1] ** 2)

@elementwise("mat-matvec-matmat", M(3, 3), M(3, 2), V(2))
@ti.func
def _(a, b, c):
    return (a @ b @ c).norm_sqr() + (a @ a)[2, 1]

@elementwise("mat-identity-elementwise-static-index", M(3, 3))
@ti.func
def _(a, b, c):
    d = a - ti.Matrix.identity(ti.f64, 3)
    e = d * a + 0.5 * a ** 2 - ti.sin(a) / 4.0
    return e.sum() + e[1, 0] * d[2, 2] + a[0, 1]

@elementwise("vec-swizzle", V(3), V(3))
@ti.func
def _(a, b, c):
    return a.xy.dot(b.zx) + a.zyx.cross(b.rgb).norm_sqr() + a.xxy.sum()

@elementwise("vec-mat-constant-slices", V(3), M(3, 3))
@ti.func
def _(a, b, c):
    return a[:2].dot(a[1:]) + (b[1, :] * a).sum() + b[0:2, 1].norm_sqr()

@elementwise("mat-local-carried-in-loop", M(2, 2))
@ti.func
def _(a, b, c):
    p = ti.Matrix.identity(ti.f64, 2)
    for _ in range(8):
        p = p @ (ti.Matrix.identity(ti.f64, 2) + a * 0.3)
        p[0, 1] = ti.tanh(p[0, 1])
    return p.sum() + p.trace() ** 2

@elementwise("mat-static-loops-over-entries", M(2, 3), V(3))
@ti.func
def _(a, b, c):
    s = 0.0
    for r, k in ti.static(ti.ndrange(2, 3)):
        s += a[r, k] * b[k] ** (r + 1)
    return s

@case("scalar-expr-times-vector")
def _():
    x, v, loss = inp(), inp(vec=2, lo=0.3, hi=1.0, signed=True), scalar_loss()
    @ti.kernel
    def k():
        for i in x:
            loss[None] += (x[i] * v[i]).sum() + ((x[i] + 1.0) * v[i] - x[i] / v[i]).norm_sqr()
    return Built(k, loss, [x, v])

@case("matrix-field-2d-struct-for")
def _():
    m, v, loss = inp((2, 3), mat=(2, 2)), inp((2, 3), vec=2), scalar_loss()
    @ti.kernel
    def k():
        for i, j in m:
            loss[None] += (m[i, j] @ v[i, j]).dot(v[i, j]) * (i + j + 1) + m[i, j][1, 0] ** 2
    return Built(k, loss, [m, v])

@case("vec-field-intermediate-two-kernels")
def _():
    p, x, loss = inp(vec=3), inp(), scalar_loss()
    q = ti.Vector.field(3, ti.f64, shape=N, needs_grad=True)
    r, acc = ti.Vector.field(2, ti.f64, shape=N, needs_grad=True), \
        ti.Vector.field(3, ti.f64, shape=2, needs_grad=True)
    @ti.kernel
    def transform():
        for j in acc:
            acc[j] = ti.Vector([0.0, 0.0, 0.0])
        for i in p:
            q[i] = p[i] * x[i] + p[i].cross(ti.Vector([1.0, 0.0, x[i]]))
            r[i][1] = ti.sin(x[i]) * p[i][0]                # component store
            acc[i % 2] += p[i] * x[i]                       # vector atomic add
            ti.atomic_add(acc[1][2], x[i] ** 2)             # component atomic add
    @ti.kernel
    def reduce():
        for i in q:
            loss[None] += q[i].norm(1e-8) * x[i] + acc[i % 2].dot(q[i]) + r[i][1] * r[i].sum()
    return Built(lambda: (transform(), reduce()), loss, [p, x])

# ---- globals: intermediate fields, atomics, stores, scalar arguments ------------------------
def _two_kernel_pipeline(manual):
    x, w, loss, y = inp(), inp(), scalar_loss(), ti.field(ti.f64, shape=N, needs_grad=True)
    @ti.kernel
    def produce():
        for i in x:
            y[i] = ti.sin(x[i]) * x[i] + w[i]
    @ti.kernel
    def consume():
        for i in y:
            loss[None] += y[i] ** 2 * w[i] + y[(i + 1) % N] * x[i]
    return Built(lambda: (produce(), consume()), loss, [x, w],
                 manual=(lambda: (consume.grad(), produce.grad())) if manual else None)

case("two-kernels-intermediate-field")(lambda: _two_kernel_pipeline(manual=False))
case("two-kernels-intermediate-field-manual-grad")(lambda: _two_kernel_pipeline(manual=True))

@elementwise("manual-grad-single-kernel", S(), S(), manual=True)
@ti.func
def _(a, b, c):
    return ti.exp(a * b) - a / (2.0 + b)

@case("atomic-add-sub-functions")
def _():
    x, y, loss = inp(), inp(), scalar_loss()
    @ti.kernel
    def k():
        for i in x:
            ti.atomic_add(loss[None], x[i] ** 2 * y[i])
            ti.atomic_sub(loss[None], ti.sin(y[i]) * x[i])
            loss[None] -= 0.5 * y[i] ** 3
    return Built(k, loss, [x, y])

@case("store-then-atomic-data-dependent-index")
def _():
    # idx = int(2.5 x + 2.5) in 0..4, with x away from the jumps
    x, y = inp(values=[-0.75, 0.1, 0.55, -0.3, 0.9]), inp()
    loss, h = scalar_loss(), ti.field(ti.f64, shape=N, needs_grad=True)
    @ti.kernel
    def scatter():
        for j in h:
            h[j] = 0.0
        for i in x:
            idx = ti.cast(x[i] * 2.5 + 2.5, ti.i32)
            h[idx] += x[i] * y[(idx + 1) % N]
    @ti.kernel
    def gather():
        for i in x:
            idx = ti.cast(ti.floor(x[i] * 2.5 + 2.5), ti.i32)
            loss[None] += y[idx] * x[i] + h[idx] ** 2
    return Built(lambda: (scatter(), gather()), loss, [x, y])

@case("plain-stores-into-loss-overwrite")
def _():
    x, loss = inp(4), scalar_loss()
    @ti.kernel
    def overwritten():
        loss[None] = ti.exp(x[0]) * 100.0   # the next kernel overwrites it: no gradient
    @ti.kernel
    def k():
        loss[None] = x[0] * x[1] + ti.sin(x[2]) / (1.5 + x[3])
    return Built(lambda: (overwritten(), k()), loss, [x])

@case("zero-d-field-param")
def _():
    s, x, loss = inp(()), inp(), scalar_loss()
    @ti.kernel
    def k():
        loss[None] += s[None] ** 2
        for i in x:
            loss[None] += s[None] * x[i] ** 2 + ti.sin(s[None] * x[i])
    return Built(k, loss, [s, x])

def _scalar_args_case(manual):
    x, loss = inp(lo=0.3, hi=1.2), scalar_loss()
    @ti.kernel
    def k(a: ti.f64, n: ti.i32):
        for i in x:
            v = x[i]
            for _ in range(n + 4):   # an argument in an inner loop bound
                v = v - 0.3 * ti.sin(v) * x[i]
            loss[None] += a * x[i] ** n + ti.sin(a * v) * n
    return Built(lambda: k(1.5, 3), loss, [x], manual=(lambda: k.grad(1.5, 3)) if manual else None)

case("kernel-scalar-args")(lambda: _scalar_args_case(manual=False))
case("kernel-scalar-args-manual-grad")(lambda: _scalar_args_case(manual=True))

@case("kernel-called-twice-different-args")
def _():
    x, y, loss = inp(), inp(), scalar_loss()
    @ti.kernel
    def k(src: ti.template(), other: ti.template(), w: ti.f64):
        for i in src:
            loss[None] += w * src[i] ** 2 * other[i] + ti.sin(src[i] * w)
    return Built(lambda: (k(x, y, 1.5), k(y, x, -0.7)), loss, [x, y])

@case("atomic-max-into-loss")
def _():
    # distinct positive products: one clear winner, which gets the whole gradient
    x, y = inp(values=[0.3, 0.9, 0.5, 0.7, 0.1]), inp(values=[1.1, 1.4, 1.0, 1.3, 1.2])
    loss = scalar_loss()
    @ti.kernel
    def k():
        for i in x:
            ti.atomic_max(loss[None], x[i] * y[i])
    return Built(k, loss, [x, y])

@case("atomic-min-max-into-intermediates")
def _():
    # distinct values: one clear winner for the minimum and for each row's maximum (w rng)
    x, y = inp(values=[0.3, -0.9, 0.5, 0.7, 0.1]), inp(values=[0.2, 0.1, -0.4, 0.3, 0.0])
    w, loss = inp((3, N)), scalar_loss()
    m, rows = ti.field(ti.f64, shape=(), needs_grad=True), ti.field(ti.f64, 3, needs_grad=True)
    @ti.kernel
    def reduce():
        m[None] = 10.0
        for r in rows:
            rows[r] = -100.0
        for i in x:
            ti.atomic_min(m[None], x[i] * 2.0 + y[i])
        for r, j in ti.ndrange(3, N):
            ti.atomic_max(rows[r], w[r, j] * x[j])
    @ti.kernel
    def use():
        loss[None] = m[None] * 3.0 + m[None] ** 2
        for r in rows:
            loss[None] += ti.exp(rows[r]) * (r + 1)
    return Built(lambda: (reduce(), use()), loss, [x, y, w])

# ---- custom gradients -----------------------------------------------------------------------
@case("grad-replaced-with-args-and-plain-kernel")
def _():
    x, loss, y = inp(), scalar_loss(), ti.field(ti.f64, shape=N, needs_grad=True)
    @ti.kernel
    def cube(scale: ti.f64):
        for i in x:
            y[i] = scale * x[i] ** 3
    @ti.kernel
    def cube_grad(scale: ti.f64):
        for i in x:
            x.grad[i] += 3.0 * scale * x[i] ** 2 * y.grad[i]
    @ti.kernel
    def total():
        for i in y:
            loss[None] += ti.tanh(y[i])
    @ti.ad.grad_replaced
    def apply(scale):
        cube(scale)
    @ti.ad.grad_for(apply)
    def apply_grad(scale):
        cube_grad(scale)
    return Built(lambda: (apply(1.7), total()), loss, [x])


# ---- the test -------------------------------------------------------------------------------
def test_corpus_is_large_enough():
    assert len(CASES) >= 45


@pytest.mark.parametrize("builder", CASES)
def test_gradient_matches_finite_differences(mode, builder):
    global RNG
    RNG = np.random.default_rng(20240607)
    c = builder()
    if c.manual is None:
        with ti.ad.Tape(loss=c.loss):
            c.run()
    else:
        ti.ad.clear_all_gradients()
        c.loss[None] = 0
        c.run()
        c.loss.grad[None] = 1
        c.manual()
    autodiff = [p.grad.to_numpy() for p in c.params]

    def run_loss():
        c.loss[None] = 0
        c.run()
        return c.loss[None]

    for index, (param, grad) in enumerate(zip(c.params, autodiff)):
        fd = finite_difference(run_loss, param, c.eps)
        assert np.any(fd != 0), f"param {index}: the loss does not depend on it (a vacuous case)"
        np.testing.assert_allclose(grad, fd, rtol=c.rtol, atol=c.atol,
                                   err_msg=f"param {index}: autodiff vs finite differences")
