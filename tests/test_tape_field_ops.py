"""Python-scope field operations inside a Tape (tinyad/tapeops.py), against f64 finite
differences. What Taichi 1.7.4 does with each (run on its CPU backend):
  * copy_from: a kernel (tensor_to_tensor) the Tape records and differentiates: the gradient
    flows through the copy. tinyad: the same.
  * from_numpy (to_numpy too): kernels the Tape records; from_numpy's adjoint zeroes the
    destination's gradient, so a copy through numpy silently cuts the gradient. tinyad: the
    same gradient, and a warning that names the line.
  * fill: a kernel the Tape records; a vector field's fill differentiates (its adjoint zeroes the
    gradient), a scalar field's fails to compile its adjoint ("Mixed usage of for-loops and
    statements without looping"). tinyad: zeroes the gradient, for both.
  * x[i] = v: not recorded, so a gradient reaching x[i] flows on to what wrote x[i] before it was
    overwritten: a wrong gradient. tinyad: the overwritten element passes nothing back.
"""
import numpy as np
import pytest

import tinyad as ti
from tests.gradcheck import finite_difference

N = 3


@pytest.fixture
def chain(mode):
    """y = x**2, then some Python-scope operation on z, then loss = sum (i+1) z[i]."""
    return _chain()


def _chain(needs_dual=False):
    x, y, z = (ti.field(ti.f64, shape=N, needs_grad=True, needs_dual=needs_dual)
               for _ in range(3))
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=needs_dual)

    @ti.kernel
    def square():
        for i in x:
            y[i] = x[i] ** 2

    @ti.kernel
    def total():
        for i in z:
            loss[None] += z[i] * (i + 1)

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    return x, y, z, loss, square, total


def _gradient(x, loss, run):
    with ti.ad.Tape(loss):
        run()
    got = x.grad.to_numpy()

    def loss_value():
        loss[None] = 0.0
        run()
        return loss[None]
    return got, finite_difference(loss_value, x)


def test_copy_from_is_differentiated(chain, capsys):
    x, y, z, loss, square, total = chain

    def run():
        square()
        z.copy_from(y)
        total()
    got, truth = _gradient(x, loss, run)
    np.testing.assert_allclose(got, truth, rtol=1e-6)
    np.testing.assert_allclose(got, [2.0, 8.0, 18.0])           # 2 x (i + 1), as Taichi
    assert "warning" not in capsys.readouterr().err.lower()


def test_a_copy_then_fill_or_overwrite_passes_nothing_back(chain):
    x, y, z, loss, square, total = chain

    def filled():
        square()
        z.copy_from(y)
        z.fill(2.0)
        total()

    def overwritten():
        square()
        z.copy_from(y)
        z[0] = 5.0                     # Taichi gives x.grad[0] = 2 here: not the derivative
        total()
    for run, expected in ((filled, [0.0, 0.0, 0.0]), (overwritten, [0.0, 8.0, 18.0])):
        got, truth = _gradient(x, loss, run)
        np.testing.assert_allclose(truth, expected, atol=1e-6)
        np.testing.assert_allclose(got, truth, atol=1e-6)


def test_setting_an_input_inside_the_tape_keeps_its_gradient(mode):
    """x[i] = v with nothing before it in the Tape writing x (Taichi records nothing): x.grad is
    the derivative with respect to the value set, as in Taichi."""
    x = ti.field(ti.f64, shape=2, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def total():
        for i in x:
            loss[None] += x[i] ** 3

    with ti.ad.Tape(loss):
        x[0] = 2.0
        x[1] = 3.0
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), [12.0, 27.0])


def test_vector_fields_copy_and_fill(mode):
    x, y, z = (ti.Vector.field(2, ti.f64, shape=N, needs_grad=True) for _ in range(3))
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def square():
        for i in x:
            y[i] = x[i] ** 2

    @ti.kernel
    def total():
        for i in z:
            loss[None] += z[i][0] * (i + 1) + z[i][1] * ti.sin(z[i][0])

    x.from_numpy(np.arange(1.0, 7.0).reshape(N, 2) / 4)

    def copied():
        square()
        z.copy_from(y)
        total()

    def filled_first():
        z.fill(0.5)
        square()
        z.copy_from(y)
        total()
    for run in (copied, filled_first):
        got, truth = _gradient(x, loss, run)
        assert np.abs(truth).max() > 0.1
        np.testing.assert_allclose(got, truth, rtol=1e-6)


def test_copy_chain_and_state_copied_back(mode):
    """A copy's source read again later, and a field copied into and read twice: each reader's
    gradient adds up."""
    x, a, b = (ti.field(ti.f64, shape=N, needs_grad=True) for _ in range(3))
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def grow():
        for i in x:
            a[i] = ti.exp(x[i] * 0.5)

    @ti.kernel
    def total():
        for i in a:
            loss[None] += a[i] * b[i] + b[i] ** 2

    x.from_numpy(np.array([0.1, -0.4, 0.7]))

    def run():
        grow()
        b.copy_from(a)
        total()
    got, truth = _gradient(x, loss, run)
    np.testing.assert_allclose(got, truth, rtol=1e-6)


def test_ndarray_copy_from(mode):
    x, y, z = (ti.ndarray(ti.f64, N, needs_grad=True) for _ in range(3))
    loss = ti.ndarray(ti.f64, (), needs_grad=True)

    @ti.kernel
    def square(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            y[i] = x[i] ** 2

    @ti.kernel
    def total(z: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in z:
            loss[None] += z[i] * (i + 1)

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    with ti.ad.Tape(loss):
        square(x, y)
        z.copy_from(y)
        total(z, loss)
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0, 8.0, 18.0])   # as Taichi's


def test_grad_check_replays_the_copy(chain, capsys):
    """Tape(grad_check=...) replays what the Tape recorded: the copy is part of it."""
    x, y, z, loss, square, total = chain
    with ti.ad.Tape(loss, grad_check=[x]):
        square()
        z.copy_from(y)
        total()
    assert "variable 0 passes grad check" in capsys.readouterr().out


def test_copy_inside_forward_mode_carries_the_tangent(mode):
    x, y, z, loss, square, total = _chain(needs_dual=True)
    with ti.ad.FwdMode(loss=loss, param=x, seed=[1.0, 1.0, 1.0]):
        square()
        z.copy_from(y)
        total()
    assert loss.dual[None] == pytest.approx(2 + 8 + 18)    # sum of 2 x (i + 1)


def test_copy_from_something_else_is_refused(mode):
    z = ti.field(ti.f64, shape=N)
    with pytest.raises(ti.TinyadTypeError, match="non-field"):
        z.copy_from(np.zeros(N))


def test_verify_replays_copy_and_fill(chain):
    """ti.ad.verify replays a run's copy_from and fill as the kernels Taichi runs for them, so
    its sympy truth sees the copy (it once replayed kernels only: a loss of 0 here)."""
    x, y, z, loss, square, total = chain

    def run():
        z.fill(1.0)
        square()
        z.copy_from(y)
        total()
    result = ti.ad.verify(run, loss, [x])
    assert "all 3 elements agree with sympy" in str(result)
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0, 8.0, 18.0])
