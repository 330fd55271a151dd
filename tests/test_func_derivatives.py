"""ti.ad.grad / jvp / vjp of a @ti.func, called inside kernels: every value against sympy, in
both modes; second derivatives (a derivative of a derivative, and a Tape or FwdMode around a
kernel that calls one); the refusals."""
import numpy as np
import pytest
import sympy as sp

import tinyad as ti


def _num(expr, subs):
    return float(expr.subs(subs))


@ti.func
def cubic(x):
    return x**3 + 2 * x**2 - 3 * x + 1


def test_seed_002_dfdx_returns_4(f32_mode):
    dfdx = ti.ad.grad(cubic)

    @ti.kernel
    def k() -> float:
        return dfdx(1.0)

    assert k() == 4.0


@ti.func
def bumpy(x):
    y = ti.sin(x) * x
    if x > 0.5:
        y = y + ti.exp(0.3 * x)
    return y


@pytest.mark.parametrize("x0", [0.3, 0.9])
def test_first_and_second_derivatives_of_a_scalar_func(mode, x0):
    d1, d2 = ti.ad.grad(bumpy), ti.ad.grad(ti.ad.grad(bumpy))

    @ti.kernel
    def k(x: ti.f64) -> ti.f64:
        return d1(x) + 1000 * d2(x)

    s = sp.Symbol("x")
    f = sp.sin(s) * s + (sp.exp(0.3 * s) if x0 > 0.5 else 0)
    want = _num(sp.diff(f, s) + 1000 * sp.diff(f, s, 2), {s: x0})
    assert k(x0) == pytest.approx(want, rel=1e-10)


@ti.func
def field_like(v, m):
    # a loop, a branch and a matrix-vector product inside
    acc = 0.0
    for i in range(3):
        w = m[i, 0] * v[0] + m[i, 1] * v[1] + m[i, 2] * v[2]
        if w > 0:
            acc += w * w * v[i]
        else:
            acc += ti.cos(w)
    return acc


def _field_like_sympy():
    v = sp.symbols("v0:3")
    m = sp.Matrix(3, 3, sp.symbols("m0:9"))
    return v, m


V0 = [0.4, -0.7, 1.1]
M0 = [[0.5, 0.2, -0.3], [0.1, -0.9, 0.4], [0.7, 0.3, 0.2]]


def _field_like_truth():
    v, m = _field_like_sympy()
    subs = dict(zip(v, V0)) | dict(zip(list(m), sum(M0, [])))
    acc = 0
    for i in range(3):
        w = sum(m[i, j] * v[j] for j in range(3))
        acc += w * w * v[i] if float(w.subs(subs)) > 0 else sp.cos(w)
    return acc, v, m, subs


def test_grad_with_argnums_of_vector_and_matrix(mode):
    out_v = ti.Vector.field(3, ti.f64, shape=())
    out_m = ti.Matrix.field(3, 3, ti.f64, shape=())

    @ti.kernel
    def k():
        v = ti.Vector([V0[0], V0[1], V0[2]])
        m = ti.Matrix(M0)
        gv, gm = ti.ad.grad(field_like, argnums=(0, 1))(v, m)
        out_v[None] = gv
        out_m[None] = gm

    k()
    acc, v, m, subs = _field_like_truth()
    want_v = [_num(sp.diff(acc, s), subs) for s in v]
    want_m = [[_num(sp.diff(acc, m[i, j]), subs) for j in range(3)] for i in range(3)]
    assert np.allclose(out_v.to_numpy(), want_v, rtol=1e-10)
    assert np.allclose(out_m.to_numpy(), want_m, rtol=1e-10)
    assert np.abs(want_m).max() > 0.1


@ti.func
def polar_map(p):
    r, a = p[0], p[1]
    return ti.Vector([r * ti.cos(a), r * ti.sin(a), r * r * a])


def test_jvp_and_vjp_against_the_sympy_jacobian(mode):
    out = ti.field(ti.f64, shape=10)
    p0, v0, u0 = [1.3, 0.6], [0.25, -1.5], [0.5, -2.0, 0.75]

    @ti.kernel
    def k():
        p = ti.Vector([p0[0], p0[1]])
        y, jv = ti.ad.jvp(polar_map)(p, ti.Vector([v0[0], v0[1]]))
        y2, jtu = ti.ad.vjp(polar_map)(p, ti.Vector([u0[0], u0[1], u0[2]]))
        for i in ti.static(range(3)):
            out[i] = y[i]
            out[3 + i] = jv[i]
        out[6] = jtu[0]
        out[7] = jtu[1]
        out[8] = y2[2]

    k()
    r, a = sp.symbols("r a")
    f = sp.Matrix([r * sp.cos(a), r * sp.sin(a), r * r * a])
    jac = f.jacobian([r, a]).subs({r: p0[0], a: p0[1]})
    jac = np.array(jac.tolist(), dtype=float)
    got = out.to_numpy()
    assert np.allclose(got[:3], np.array(f.subs({r: p0[0], a: p0[1]}).tolist(), float).ravel())
    assert np.allclose(got[3:6], jac @ v0, rtol=1e-12)
    assert np.allclose(got[6:8], jac.T @ u0, rtol=1e-12)
    assert got[8] == pytest.approx(p0[0] ** 2 * p0[1])


def test_fwdmode_and_tape_around_a_kernel_calling_grad(mode):
    """grad(f) is ordinary IR: the kernel's own derivative is f''(x) * dx."""
    x = ti.field(ti.f64, shape=3, needs_grad=True, needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    dbumpy = ti.ad.grad(bumpy)

    @ti.kernel
    def k():
        for i in x:
            y[None] += dbumpy(x[i]) * x[i]

    xs = [0.2, 0.7, 1.4]
    x.from_numpy(np.array(xs))
    s = sp.Symbol("s")
    want = []
    for x0 in xs:
        f = sp.sin(s) * s + (sp.exp(0.3 * s) if x0 > 0.5 else 0)
        want.append(_num(sp.diff(sp.diff(f, s) * s, s), {s: x0}))
    with ti.ad.Tape(loss=y):
        k()
    assert np.allclose(x.grad.to_numpy(), want, rtol=1e-10)
    seed = [1.0, -2.0, 0.5]
    with ti.ad.FwdMode(loss=y, param=x, seed=seed):
        k()
    assert y.dual[None] == pytest.approx(float(np.dot(want, seed)), rel=1e-10)


def test_fields_read_by_the_func_are_constants(mode):
    c = ti.field(ti.f64, shape=(), needs_dual=True)
    c[None] = 2.5

    @ti.func
    def scaled(x):
        return c[None] * x * x

    @ti.kernel
    def k(x: ti.f64) -> ti.f64:
        return ti.ad.grad(scaled)(x)

    assert k(3.0) == pytest.approx(2 * 2.5 * 3.0)


def test_a_func_that_writes_a_field_is_refused_at_its_line(mode):
    log = ti.field(ti.f64, shape=())

    @ti.func
    def noisy(x):
        log[None] = x  # the write
        return x * x

    @ti.kernel
    def k(x: ti.f64) -> ti.f64:
        return ti.ad.grad(noisy)(x)

    with pytest.raises(ti.TinyadSyntaxError) as info:
        k(1.0)
    assert "writes the field log" in str(info.value)
    assert "# the write" in str(info.value)


def test_grad_of_a_vector_valued_func_is_refused(mode):
    @ti.kernel
    def k() -> ti.f64:
        return ti.ad.grad(polar_map)(ti.Vector([1.0, 2.0]))[0]

    with pytest.raises(ti.TinyadTypeError, match="scalar-valued"):
        k()


def test_a_cut_derivative_is_noted(mode):
    @ti.func
    def stepped(x):
        return ti.floor(x) * x

    @ti.kernel
    def k(x: ti.f64) -> ti.f64:
        return ti.ad.grad(stepped)(x)

    with pytest.warns(ti.NonDifferentiableWarning, match="floor"):
        assert k(2.5) == pytest.approx(2.0)


def test_calling_a_derivative_outside_a_kernel_is_refused():
    with pytest.raises(ti.TinyadTypeError, match="from a kernel"):
        ti.ad.grad(cubic)(1.0)


@ti.func
def newton_sqrt(a):
    # a while loop with a break: forward mode follows the iterations the values take
    y = a
    k = 0
    while True:
        y = 0.5 * (y + a / y)
        k += 1
        if k >= 30:
            break
    return y


def test_jvp_through_a_while_loop_with_break(mode):
    @ti.kernel
    def k(a: ti.f64) -> ti.f64:
        y, dy = ti.ad.jvp(newton_sqrt)(a, 1.0)
        return dy

    assert k(2.0) == pytest.approx(0.5 / np.sqrt(2.0), rel=1e-12)


def test_integer_arguments_are_differentiated_as_floats(f32_mode):
    @ti.kernel
    def k() -> float:
        return ti.ad.grad(cubic)(1) + ti.ad.grad(cubic, argnums=0)(2)

    assert k() == pytest.approx(4.0 + (3 * 4 + 4 * 2 - 3))


def test_a_func_returning_a_tuple_is_refused(mode):
    @ti.func
    def pair(x):
        return x, x * x

    @ti.kernel
    def k(x: ti.f64) -> ti.f64:
        return ti.ad.grad(pair)(x)

    with pytest.raises(ti.TinyadTypeError, match="not a tuple"):
        k(1.0)
