"""Second order: forward mode over reverse mode (FwdMode around a Tape or around .grad() calls),
ti.ad.hvp and ti.ad.jacobian, against sympy Hessians and Jacobians, in both modes."""
import numpy as np
import pytest
import sympy as sp

import tinyad as ti

X0 = [0.3, 0.8, -0.5]
N = 3


def _program():
    x = ti.field(ti.f64, shape=N, needs_grad=True, needs_dual=True)
    z = ti.field(ti.f64, shape=N, needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def squash():
        for i in x:
            z[i] = x[i] ** 3 * ti.sin(x[(i + 1) % N])

    @ti.kernel
    def total():
        for i in z:
            loss[None] += z[i] * x[i] + ti.exp(0.1 * z[i])

    def run():
        squash()
        total()

    x.from_numpy(np.array(X0))
    return x, z, loss, run, (squash, total)


def _sympy_truth():
    xs = sp.symbols("x0:3")
    zs = [xs[i] ** 3 * sp.sin(xs[(i + 1) % N]) for i in range(N)]
    f = sum(zs[i] * xs[i] + sp.exp(0.1 * zs[i]) for i in range(N))
    at = dict(zip(xs, X0))
    grad = np.array([float(sp.diff(f, s).subs(at)) for s in xs])
    hessian = np.array(sp.hessian(f, xs).subs(at).tolist(), dtype=float)
    jac = np.array(sp.Matrix(zs).jacobian(xs).subs(at).tolist(), dtype=float)
    return grad, hessian, jac


V = np.array([1.0, -0.5, 2.0])


def test_fwdmode_around_a_tape_gives_the_hessian_vector_product(mode):
    x, _, loss, run, _ = _program()
    grad, hessian, _ = _sympy_truth()
    with ti.ad.FwdMode(loss=x.grad, param=x, seed=list(V)):
        with ti.ad.Tape(loss=loss):
            run()
    assert np.allclose(x.grad.to_numpy(), grad, rtol=1e-12)
    assert np.allclose(x.grad.dual.to_numpy(), hessian @ V, rtol=1e-10)
    assert np.all(x.dual.to_numpy() == 0)   # the seed is cleared on exit


def test_fwdmode_around_grad_calls(mode):
    x, _, loss, run, (squash, total) = _program()
    _, hessian, _ = _sympy_truth()
    with ti.ad.FwdMode(loss=x.grad, param=x, seed=[0.0, 1.0, 0.0]):
        run()
        loss.grad[None] = 1.0
        total.grad()
        squash.grad()
    assert np.allclose(x.grad.dual.to_numpy(), hessian[:, 1], rtol=1e-10)


def test_hvp_helper(mode):
    x, _, loss, run, _ = _program()
    _, hessian, _ = _sympy_truth()
    for v in (V, np.eye(N)[2]):
        assert np.allclose(ti.ad.hvp(run, loss, x, v), hessian @ v, rtol=1e-10)
    assert np.allclose(x.to_numpy(), X0)


def test_jacobian_helper(mode):
    x, z, _, run, _ = _program()
    _, _, jac = _sympy_truth()
    got = ti.ad.jacobian(run, z, x)
    assert got.shape == (N, N)
    assert np.allclose(got, jac, rtol=1e-12)


def test_seed_002_forward_of_reverse_second_derivative(mode):
    """Seed 002's dfdx built on f.grad(), differentiated again by FwdMode: f''(1) = 10."""
    x = ti.field(float, shape=(), needs_grad=True, needs_dual=True)
    y = ti.field(float, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def f():
        y[None] += x[None] ** 3 + 2 * x[None] ** 2 - 3 * x[None] + 1

    x[None] = 1.0
    with ti.ad.FwdMode(loss=x.grad, param=x):
        y.grad[None] = 1.0
        f.grad()
    assert x.grad[None] == pytest.approx(4.0)
    assert x.grad.dual[None] == pytest.approx(10.0)


def test_a_gradient_without_a_dual_is_reported_in_interp_mode(mode):
    if mode != "interp":
        pytest.skip("the missing-dual check runs in interp mode")
    x = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    z = ti.field(ti.f64, shape=(), needs_grad=True)   # no dual: its gradient has none either
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def k():
        z[None] = x[None] * x[None]
        loss[None] = z[None] * z[None]

    x[None] = 0.7
    with pytest.raises(ti.SilentZeroRuleError, match="dual"):
        ti.ad.hvp(k, loss, x, [1.0])


def test_hvp_names_what_the_parameter_lacks(mode):
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    with pytest.raises(ti.TinyadRuntimeError, match="needs_dual=True"):
        ti.ad.hvp(lambda: None, x, x, [1.0])


def test_a_gradient_field_without_a_dual_names_the_primal_to_fix(mode):
    if mode != "interp":
        pytest.skip("the missing-dual check runs in interp mode")
    x = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    w = ti.field(ti.f64, shape=(), needs_grad=True)   # read only, but its gradient is written
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def k():
        loss[None] = w[None] * x[None] * x[None]

    x[None], w[None] = 0.7, 1.5
    with pytest.raises(ti.SilentZeroRuleError,
                       match="declare w with needs_grad=True and needs_dual=True"):
        ti.ad.hvp(k, loss, x, [1.0])


def test_hvp_refuses_a_program_whose_gradient_breaks_a_rule(mode):
    """The tangent launches log nothing, so interp mode checks the plain Tape first."""
    if mode != "interp":
        pytest.skip("the rules are checked in interp mode")
    x = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def copy():
        y[None] = x[None]

    @ti.kernel
    def cube():
        loss[None] += y[None] ** 3

    @ti.kernel
    def double():
        y[None] = 2 * y[None]   # overwrites what cube's adjoint reads

    def run():
        copy()
        cube()
        double()

    x[None] = 0.7
    with pytest.raises(ti.SecondWriteRuleError):
        ti.ad.hvp(run, loss, x, [1.0])
