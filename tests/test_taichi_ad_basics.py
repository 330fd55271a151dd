"""Elementwise derivatives and small programs, following Taichi's test_ad_basics.py,
test_ad_basics_fwd.py, test_ad_atomic.py, test_ad_atomic_fwd.py, test_ad_dynamic_index.py,
test_ad_tensor.py and test_ad_demote_dense.py: every op Taichi's tests differentiate, against
its analytic derivative in reverse and forward mode; stores forwarded through fields, a loss
overwritten by later kernels, mixed precision, atomics, matrices indexed by loop variables,
vector locals stored into element by element, kernels with no gradient path. Both modes."""
import numpy as np
import pytest

import tinyad as ti
from tests.taichi_like import assert_fwd_matches_fd, assert_tape_matches_fd

X = np.array([0.3, 0.55, 0.7, 0.85, 1.7, 2.4])   # inside every op's domain below (asin: < 1)
Y = np.array([1.3, -0.6, 0.45, 2.0, -1.5, 0.9])

# (what the kernel computes from x and y, d/dx, d/dy); both columns analytic
OPS = [
    ("x * x * x * x", lambda x, y: 4 * x ** 3, lambda x, y: 0 * y),
    ("0.4 * x * x - 3", lambda x, y: 0.8 * x, lambda x, y: 0 * y),
    ("(x - 3) * (x - 1) + x * x", lambda x, y: 4 * x - 4, lambda x, y: 0 * y),
    ("ti.abs(-x) - x", lambda x, y: 0 * x, lambda x, y: 0 * y),
    ("ti.sin(x) + ti.cos(y) + ti.tanh(x)", lambda x, y: np.cos(x) + 1 - np.tanh(x) ** 2,
     lambda x, y: -np.sin(y)),
    ("ti.asin(x / 3) + ti.acos(x / 3) * 2 + ti.atan2(x, y)",
     lambda x, y: 1 / np.sqrt(9 - x * x) - 2 / np.sqrt(9 - x * x) + y / (x * x + y * y),
     lambda x, y: -x / (x * x + y * y)),
    ("ti.exp(x) * ti.log(x) + ti.sqrt(x)", lambda x, y: np.exp(x) * (np.log(x) + 1 / x)
     + 0.5 / np.sqrt(x), lambda x, y: 0 * y),
    ("x ** y + ti.pow(x, 2.5)", lambda x, y: y * x ** (y - 1) + 2.5 * x ** 1.5,
     lambda x, y: x ** y * np.log(x)),
    ("x - ti.floor(x) + ti.ceil(y)", lambda x, y: 1 + 0 * x, lambda x, y: 0 * y),
    ("ti.min(x, y) * 2 + ti.max(x, y)", lambda x, y: np.where(x < y, 2.0, 1.0),
     lambda x, y: np.where(x < y, 1.0, 2.0)),
    ("x % 0.5 + y % 2.0", lambda x, y: 1 + 0 * x, lambda x, y: 1 + 0 * y),
    ("x * x if x > 0.6 else -x * y", lambda x, y: np.where(x > 0.6, 2 * x, -y),
     lambda x, y: np.where(x > 0.6, 0.0, -x)),
    ("ti.cast(ti.cast(x, ti.f32), ti.f64) * y", lambda x, y: y, lambda x, y: x + 0 * y),
]


def _op_kernel():
    """One kernel computing every row of OPS (its source generated once, traced as any other)."""
    n = len(X)
    x = ti.field(ti.f64, shape=n, needs_grad=True, needs_dual=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True, needs_dual=True)
    out = ti.field(ti.f64, shape=(len(OPS), n), needs_grad=True, needs_dual=True)
    x.from_numpy(X)
    y.from_numpy(Y)
    return x, y, out, ops_kernel


@ti.kernel
def ops_kernel(xs: ti.template(), ys: ti.template(), out: ti.template()):
    for i in xs:
        x = xs[i]
        y = ys[i]
        out[0, i] = x * x * x * x
        out[1, i] = 0.4 * x * x - 3
        out[2, i] = (x - 3) * (x - 1) + x * x
        out[3, i] = ti.abs(-x) - x
        out[4, i] = ti.sin(x) + ti.cos(y) + ti.tanh(x)
        out[5, i] = ti.asin(x / 3) + ti.acos(x / 3) * 2 + ti.atan2(x, y)
        out[6, i] = ti.exp(x) * ti.log(x) + ti.sqrt(x)
        out[7, i] = x ** y + ti.pow(x, 2.5)
        out[8, i] = x - ti.floor(x) + ti.ceil(y)
        out[9, i] = ti.min(x, y) * 2 + ti.max(x, y)
        out[10, i] = x % 0.5 + y % 2.0
        out[11, i] = x * x if x > 0.6 else -x * y
        out[12, i] = ti.cast(ti.cast(x, ti.f32), ti.f64) * y


def test_every_op_has_its_analytic_derivative(mode):
    x, y, out, kernel = _op_kernel()
    kernel(x, y, out)
    for row, (_, dx, dy) in enumerate(OPS):
        x.grad.fill(0)
        y.grad.fill(0)
        seed = np.zeros(out.shape)
        seed[row] = 1.0
        out.grad.from_numpy(seed)
        kernel.grad(x, y, out)
        rtol = 1e-6 if row == len(OPS) - 1 else 1e-12     # the row through f32
        np.testing.assert_allclose(x.grad.to_numpy(), dx(X, Y), rtol=rtol, err_msg=OPS[row][0])
        np.testing.assert_allclose(y.grad.to_numpy(), dy(X, Y), rtol=rtol, err_msg=OPS[row][0])


@pytest.mark.parametrize("param", ["x", "y"])
def test_forward_mode_gives_the_same_derivatives(mode, param):
    x, y, out, kernel = _op_kernel()
    wrt = x if param == "x" else y
    with ti.ad.FwdMode(loss=out, param=wrt, seed=[1.0] * len(X)):
        kernel(x, y, out)
    for row, ops in enumerate(OPS):
        want = ops[1 if param == "x" else 2](X, Y)
        rtol = 1e-6 if row == len(OPS) - 1 else 1e-12
        np.testing.assert_allclose(out.dual.to_numpy()[row], want, rtol=rtol, err_msg=ops[0])


def test_atomic_reduce_reverse_and_forward(mode):
    """test_ad_atomic(_fwd): loss += x[i] ** 2 over a parallel loop."""
    x = ti.field(ti.f64, shape=16, needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def reduce():
        for i in x:
            loss[None] += x[i] ** 2

    x.from_numpy(np.arange(16.0))
    (grad,) = assert_tape_matches_fd(reduce, loss, [x])
    np.testing.assert_allclose(grad, 2 * np.arange(16.0))
    assert_fwd_matches_fd(reduce, loss, x)


def test_values_forwarded_through_stored_fields(mode):
    """ad_global_store_forwarding: e = 120 x through four stores; the intermediates' gradients
    are zero after the Tape (each store's adjoint resets what it overwrote)."""
    x, a, b, c, d, e = (ti.field(ti.f64, shape=(), needs_grad=True) for _ in range(6))

    @ti.kernel
    def chain():
        a[None] = x[None]
        b[None] = a[None] * 2
        c[None] = b[None] * 3
        d[None] = c[None] * 4
        e[None] = d[None] * 5

    x[None] = 1.0
    with ti.ad.Tape(loss=e):
        chain()
    assert e[None] == 120.0 and x.grad[None] == 120.0
    assert [f.grad[None] for f in (a, b, c, d)] == [0.0] * 4


def test_a_loss_overwritten_by_later_kernels(mode):
    """ad_set_loss_grad: three kernels store into the loss; only the last one's counts."""
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def scaled(k: ti.f64):
        loss[None] = k * x[None]

    x[None] = 1.0
    with ti.ad.Tape(loss=loss):
        scaled(1.0)
        scaled(2.0)
        scaled(4.0)
    assert loss[None] == 4.0 and x.grad[None] == 4.0


@pytest.mark.parametrize("loss_type,x_type", [(ti.f32, ti.f64), (ti.f64, ti.f32)])
def test_mixed_precision(mode, loss_type, x_type):
    """ad_precision_1/2: a loss of one float type, a parameter of the other."""
    loss = ti.field(loss_type, shape=())
    x = ti.field(x_type, shape=())
    ti.root.lazy_grad()

    @ti.kernel
    def copy():
        loss[None] = 3 * x[None]

    x[None] = 0.25
    with ti.ad.Tape(loss):
        copy()
    assert loss[None] == 0.75 and x.grad[None] == 3.0


def test_kernel_simplicity_programs(mode):
    """obey/violate_kernel_simplicity: a store then += in an unrolled loop, or the two mixed;
    Taichi's rule of thumb, which tinyad differentiates either way (the adjoint is exact)."""
    x = ti.field(ti.f64)
    y = ti.field(ti.f64)
    ti.root.dense(ti.i, 2).place(x, y)
    loss = ti.field(ti.f64, shape=())
    ti.root.lazy_grad()

    @ti.kernel
    def obey():
        for i in x:
            for _ in ti.static(range(3)):
                y[i] += x[i] * 42
                y[i] -= x[i] * 5

    @ti.kernel
    def store_then_add():
        for i in x:
            y[i] = x[i] * 42
            for _ in ti.static(range(3)):
                y[i] += x[i] * x[i]
            loss[None] += y[i]

    x.from_numpy(np.array([0.1, -0.3]))
    y.grad.fill(1.0)
    obey()
    obey.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), [(42 - 5) * 3] * 2)
    (grad,) = assert_tape_matches_fd(store_then_add, loss, [x])
    np.testing.assert_allclose(grad, 42 + 6 * x.to_numpy())


def test_matrix_elements_indexed_by_loop_variables(mode):
    """test_ad_dynamic_index: m[i][j, k] with j, k from ti.ndrange."""
    m = ti.Matrix.field(2, 2, ti.f64, 5, needs_grad=True)
    n = ti.Matrix.field(2, 2, ti.f64, 5, needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)

    @ti.kernel
    def weigh():
        for i in range(5):
            for j, k in ti.ndrange(2, 2):
                m[i][j, k] = (j + 1) * (k + 1) * n[i][j, k] ** 2
                loss[None] += m[i][j, k]

    n.from_numpy(np.arange(20.0).reshape(5, 2, 2) / 10)
    loss.grad[None] = 1.0
    weigh()
    weigh.grad()
    weights = np.outer([1, 2], [1, 2])
    np.testing.assert_allclose(n.grad.to_numpy(), 2 * weights * n.to_numpy())


def test_vector_local_stored_element_by_element(mode):
    """test_ad_tensor: b = [t, t, t, t]; b[0] = 4 t; y = b * x."""
    x = ti.Vector.field(4, dtype=ti.f64, shape=(), needs_grad=True)
    y = ti.Vector.field(4, dtype=ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def scale(t: ti.f64):
        b = ti.Vector([t, t, t, t])
        b[0] = t * 4
        y[None] = b * x[None]

    y.grad.fill(2.0)
    scale.grad(10.0)
    assert x.grad.to_numpy().tolist() == [80.0, 20.0, 20.0, 20.0]


def test_kernels_with_no_gradient_path_run_their_adjoint(mode):
    """test_mod, test_ad_demote_dense: .grad() of kernels over integer fields, or over fields
    without gradients, runs (as in Taichi) and changes no value."""
    xi = ti.field(ti.i32)
    yi = ti.field(ti.i32)
    ti.root.dense(ti.i, 1).place(xi, yi)
    a = ti.field(ti.f64, shape=(3, 2, 4))
    ti.root.lazy_grad()

    @ti.kernel
    def mod3():
        yi[0] = xi[0] % 3

    @ti.kernel
    def inc():
        for i, j, k in a:
            a[i, j, k] += 1

    xi[0] = 7
    mod3()
    mod3.grad()
    inc()
    inc.grad()
    assert yi[0] == 1 and (a.to_numpy() == 1).all() and (a.grad.to_numpy() == 0).all()


def test_random_on_the_derivative_path_is_refused(mode):
    """test_ad_rand: Taichi raises 'RandStmt not supported'; tinyad names the line."""
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def noisy():
        loss[None] = x[None] * ti.random()

    with pytest.raises(ti.ReplayDivergenceRuleError, match="ti.random"):
        with ti.ad.Tape(loss):
            noisy()
