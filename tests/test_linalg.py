"""ti.svd, ti.polar_decompose, determinant and inverse: values against numpy (Python scope and
kernels), and gradients through kernels against central finite differences."""
import numpy as np
import pytest
from gradcheck import finite_difference

import tinyad as ti

DEGENERATE = {
    2: [np.eye(2), np.zeros((2, 2)), np.diag([3.0, -2.0]), np.array([[1.0, 2.0], [2.0, -1.0]]),
        np.array([[0.0, -1.0], [1.0, 0.0]]), np.ones((2, 2)), np.array([[1.0, 2.0], [2.0, 4.0]]),
        np.array([[0.0, 0.0], [0.0, 5.0]]), np.diag([1e-9, 1e9])],
    3: [np.eye(3), np.zeros((3, 3)), np.diag([1.0, 1.0, 2.0]), np.diag([3.0, -2.0, 1.0]),
        -np.eye(3), np.ones((3, 3)), np.diag([1.0, 0.0, 0.0]),
        np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]]),
        np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]), np.diag([1e-6, 1.0, 1e6])],
}


def random_matrices(n, count, seed):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, n)) * 10.0 ** rng.uniform(-2, 2) for _ in range(count)]


def rotation(n, rng):
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return q * np.sign(np.linalg.det(q))


def well_conditioned(n, seed):
    """Random matrices with well separated singular values (one with det < 0)."""
    rng = np.random.default_rng(seed)
    sigmas = [[2.5, 1.5, 0.7][:n], [3.0, 1.0, -0.4][:n] if n == 3 else [3.0, -1.0]]
    return np.stack([rotation(n, rng) @ np.diag(s) @ rotation(n, rng) for s in sigmas])


def check_svd(a, u, s, v, tol):
    n = a.shape[0]
    scale = max(1.0, np.abs(a).max())
    assert np.allclose(u @ s @ v.T, a, atol=tol * scale, rtol=0)
    assert np.allclose(u.T @ u, np.eye(n), atol=tol) and np.allclose(v.T @ v, np.eye(n), atol=tol)
    assert np.linalg.det(u) > 0 and np.linalg.det(v) > 0          # rotations, as in Taichi
    assert np.allclose(s, np.diag(np.diag(s)), atol=0)             # diagonal
    sigma = np.diag(s)
    assert all(sigma[i] >= sigma[i + 1] - tol * scale for i in range(n - 1))
    assert np.all(sigma[:-1] >= 0)                                 # only the last may be < 0
    assert np.allclose(np.abs(sigma), np.linalg.svd(a, compute_uv=False), atol=tol * scale, rtol=0)
    if abs(np.linalg.det(a)) > tol * scale ** n:
        assert (sigma[-1] < 0) == (np.linalg.det(a) < 0)


def closest_rotation(a):
    w, _, vh = np.linalg.svd(a)
    d = np.ones(len(a))
    d[-1] = np.sign(np.linalg.det(w @ vh))
    return w @ np.diag(d) @ vh


def check_polar(a, u, p, tol, compare=True):
    n = a.shape[0]
    scale = max(1.0, np.abs(a).max())
    assert np.allclose(u @ p, a, atol=tol * scale, rtol=0)
    assert np.allclose(u.T @ u, np.eye(n), atol=tol)
    assert np.linalg.det(u) > 0
    assert np.allclose(p, p.T, atol=tol * scale, rtol=0)
    if compare:  # unique when the two smallest singular values differ and A is not singular
        assert np.allclose(u, closest_rotation(a), atol=1e3 * tol)


def to_np(m):
    return np.asarray(m.to_numpy(), dtype=np.float64)


# ---- values in Python scope ---------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3])
def test_svd_python_scope_random(mode, n):
    for a in random_matrices(n, 40, seed=n):
        u, s, v = ti.svd(ti.Matrix(a.tolist()))
        check_svd(a, to_np(u), to_np(s), to_np(v), 1e-9)


@pytest.mark.parametrize("n", [2, 3])
def test_svd_python_scope_degenerate(mode, n):
    for a in DEGENERATE[n]:
        u, s, v = ti.svd(ti.Matrix(a.tolist()))
        assert all(np.isfinite(x) for m in (u, s, v) for x in m.entries)
        check_svd(a, to_np(u), to_np(s), to_np(v), 1e-9)


@pytest.mark.parametrize("n", [2, 3])
def test_polar_python_scope(mode, n):
    for a in random_matrices(n, 40, seed=10 + n):
        u, p = ti.polar_decompose(ti.Matrix(a.tolist()))
        check_polar(a, to_np(u), to_np(p), 1e-9)
    for a in DEGENERATE[n]:
        u, p = ti.polar_decompose(ti.Matrix(a.tolist()))
        check_polar(a, to_np(u), to_np(p), 1e-9, compare=False)


def test_polar_2x2_follows_taichi_closed_form(mode):
    a = np.array([[1.0, -2.0], [0.5, 3.0]])
    x, y = a[0, 0] + a[1, 1], a[1, 0] - a[0, 1]
    c, s = x / np.hypot(x, y), y / np.hypot(x, y)
    r = np.array([[c, -s], [s, c]])
    u, p = ti.polar_decompose(ti.Matrix(a.tolist()))
    assert np.allclose(to_np(u), r, atol=1e-14) and np.allclose(to_np(p), r.T @ a, atol=1e-14)


def test_positive_definite_polar_factor(mode):
    rng = np.random.default_rng(7)
    a = rotation(3, rng) @ np.diag([3.0, 2.0, 0.5]) @ rotation(3, rng)
    _, p = ti.polar_decompose(ti.Matrix(a.tolist()))
    w, sig, vh = np.linalg.svd(a)
    assert np.allclose(to_np(p), vh.T @ np.diag(sig) @ vh, atol=1e-12)


def test_integer_matrix_and_dt(mode):
    u, s, v = ti.svd(ti.Matrix([[1, 2], [3, 4]]), ti.f64)
    assert all(isinstance(e, float) for e in s.entries)
    check_svd(np.array([[1.0, 2.0], [3.0, 4.0]]), to_np(u), to_np(s), to_np(v), 1e-12)


def test_unsupported_size(mode):
    with pytest.raises(ti.TinyadTypeError):
        ti.svd(ti.Matrix(np.eye(4).tolist()))
    with pytest.raises(ti.TinyadTypeError):
        ti.polar_decompose(ti.Matrix([[1.0, 2.0, 3.0]]))


# ---- values in kernels ---------------------------------------------------------------------------
def decompose_in_kernel(batch, dtype=ti.f64, dt=None):
    count, n = batch.shape[0], batch.shape[1]
    a = ti.Matrix.field(n, n, dtype, shape=count)
    outs = [ti.Matrix.field(n, n, dtype, shape=count) for _ in range(5)]
    u_svd, s_svd, v_svd, u_pol, p_pol = outs

    @ti.kernel
    def run():
        for i in a:
            u, s, v = ti.svd(a[i], dt)
            u_svd[i], s_svd[i], v_svd[i] = u, s, v
            r, p = ti.polar_decompose(a[i], dt)
            u_pol[i] = r
            p_pol[i] = p

    a.from_numpy(batch.astype(dtype.np))
    run()
    return [o.to_numpy().astype(np.float64) for o in outs]


@pytest.mark.parametrize("n", [2, 3])
def test_svd_and_polar_in_kernel(mode, n):
    batch = np.stack(random_matrices(n, 8, seed=20 + n) + DEGENERATE[n])
    u, s, v, r, p = decompose_in_kernel(batch)
    for k, a in enumerate(batch):
        check_svd(a, u[k], s[k], v[k], 1e-9)
        check_polar(a, r[k], p[k], 1e-9, compare=k < 8)
        # the kernel computes what Python scope computes (for a degenerate matrix the singular
        # vectors are not unique: fast mode's reassociated rounding may pick other ones)
        pu, ps, pv = ti.svd(ti.Matrix(a.tolist()))
        assert np.allclose(to_np(ps), s[k], atol=1e-12)
        assert k >= 8 or np.allclose(to_np(pu), u[k], atol=1e-9)


@pytest.mark.parametrize("n", [2, 3])
def test_svd_in_f32_kernel(f32_mode, n):
    batch = np.stack(random_matrices(n, 6, seed=30 + n)) / 10.0
    u, s, v, r, p = decompose_in_kernel(batch, ti.f32, ti.f32)
    for k, a in enumerate(batch):
        check_svd(a, u[k], s[k], v[k], 1e-4)
        check_polar(a, r[k], p[k], 1e-4, compare=False)


def test_svd_in_func_and_branch(mode):
    a = ti.Matrix.field(3, 3, ti.f64, shape=2)
    out = ti.field(ti.f64, shape=2)

    @ti.func
    def largest(m):
        _, s, _ = ti.svd(m)
        return s[0, 0]

    @ti.kernel
    def run():
        for i in a:
            if a[i][0, 0] > 0:
                out[i] = largest(a[i])
            else:
                out[i] = -largest(a[i])

    batch = np.stack(random_matrices(3, 2, seed=5))
    batch[0, 0, 0], batch[1, 0, 0] = 1.0, -1.0
    a.from_numpy(batch)
    run()
    expect = [np.linalg.svd(m, compute_uv=False)[0] for m in batch]
    assert np.allclose(out.to_numpy(), [expect[0], -expect[1]], atol=1e-10)


# ---- gradients -----------------------------------------------------------------------------------
def gradient_check(batch, body, eps=1e-6, tol=1e-6, tape=False):
    """Compare d(loss)/d(a) from reverse mode with central differences; `body(m, w)` gives the
    loss contribution of one matrix m with weights w (a matrix of fixed random numbers)."""
    count, n = batch.shape[0], batch.shape[1]
    a = ti.Matrix.field(n, n, ti.f64, shape=count, needs_grad=True)
    w = ti.Matrix.field(n, n, ti.f64, shape=count)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute():
        for i in a:
            loss[None] += body(a[i], w[i])

    a.from_numpy(batch)
    w.from_numpy(np.random.default_rng(99).normal(size=batch.shape))
    if tape:
        with ti.ad.Tape(loss=loss):
            compute()
    else:
        loss[None] = 0
        compute()
        loss.grad[None] = 1
        compute.grad()
    grad = a.grad.to_numpy()

    def run_loss():
        loss[None] = 0
        compute()
        return loss[None]

    expect = finite_difference(run_loss, a, eps)
    assert np.all(np.isfinite(grad))
    assert np.allclose(grad, expect, atol=tol * max(1.0, np.abs(expect).max()), rtol=0), \
        (grad, expect)
    return grad


@ti.func
def singular_value_loss(m, w):
    _, s, _ = ti.svd(m)
    total = 0.0
    for i in ti.static(range(m.n)):
        total += (i + 1.0) * s[i, i] * w[i, i]
    return total


@ti.func
def svd_vectors_loss(m, w):
    u, s, v = ti.svd(m)
    total = 0.0
    for i, j in ti.static(ti.ndrange(m.n, m.n)):
        total += w[i, j] * (u[i, j] * v[j, i] + s[i, i] * u[j, i] * v[i, j])
    return total


@ti.func
def polar_loss(m, w):
    r, p = ti.polar_decompose(m)
    total = 0.0
    for i, j in ti.static(ti.ndrange(m.n, m.n)):
        total += w[i, j] * r[i, j] + (i + 1.5) * w[j, i] * p[i, j] * p[i, j]
    return total


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("body", [singular_value_loss, svd_vectors_loss, polar_loss])
def test_svd_polar_gradients(mode, n, body):
    gradient_check(well_conditioned(n, seed=40 + n), body)


@pytest.mark.parametrize("n", [2, 3])
def test_singular_value_sum_gradient_is_analytic(mode, n):
    """d(sum of signed sigma)/dA = U diag(1) V^T: a check independent of finite differences."""
    batch = well_conditioned(n, seed=50 + n)
    grad = gradient_check(batch, singular_value_sum, tape=True)
    for k, a in enumerate(batch):
        w, sig, vh = np.linalg.svd(a)
        signs = np.ones(n)
        signs[-1] = np.sign(np.linalg.det(a))  # the last signed singular value flips with det
        assert np.allclose(grad[k], w @ np.diag(signs) @ vh, atol=1e-8)


@ti.func
def singular_value_sum(m, w):
    _, s, _ = ti.svd(m)
    return s.trace()


@pytest.mark.parametrize("n", [2, 3])
def test_gradients_at_degenerate_matrices_are_finite(mode, n):
    a = ti.Matrix.field(n, n, ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute():
        for i in a:
            u, s, v = ti.svd(a[i])
            r, p = ti.polar_decompose(a[i])
            loss[None] += s.trace() + r.sum() + p.sum() + u.sum() + v.sum()

    flip = np.eye(n)
    flip[-1, -1] = -1.0
    a.from_numpy(np.stack([np.eye(n), np.zeros((n, n)), flip, np.ones((n, n))]))
    with ti.ad.Tape(loss=loss):
        compute()
    assert np.all(np.isfinite(a.grad.to_numpy()))


# ---- determinant and inverse ---------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3])
def test_determinant_and_inverse_values(mode, n):
    a_field = ti.Matrix.field(n, n, ti.f64, shape=5)
    inv_field = ti.Matrix.field(n, n, ti.f64, shape=5)
    det_field = ti.field(ti.f64, shape=5)

    @ti.kernel
    def run():
        for i in a_field:
            det_field[i] = a_field[i].determinant()
            inv_field[i] = a_field[i].inverse()

    batch = well_conditioned(n, seed=60 + n)
    batch = np.concatenate([batch, np.stack(random_matrices(n, 3, seed=61))])
    a_field.from_numpy(batch)
    run()
    assert np.allclose(det_field.to_numpy(), np.linalg.det(batch), rtol=1e-12, atol=1e-12)
    assert np.allclose(inv_field.to_numpy(), np.linalg.inv(batch), rtol=1e-9, atol=1e-12)
    for a in batch:  # Python scope, and the ti.math spellings
        m = ti.Matrix(a.tolist())
        assert ti.math.determinant(m) == pytest.approx(np.linalg.det(a), rel=1e-12)
        assert np.allclose(to_np(ti.math.inverse(m)), np.linalg.inv(a), rtol=1e-9, atol=1e-12)


@ti.func
def det_inverse_loss(m, w):
    inv = m.inverse()
    total = m.determinant() * w[0, 0]
    for i, j in ti.static(ti.ndrange(m.n, m.n)):
        total += w[i, j] * inv[i, j]
    return total


@pytest.mark.parametrize("n", [2, 3])
def test_determinant_and_inverse_gradients(mode, n):
    batch = well_conditioned(n, seed=70 + n)
    grad = gradient_check(batch, det_inverse_loss)
    weights = np.random.default_rng(99).normal(size=batch.shape)
    for k, a in enumerate(batch):   # d det = det A^-T; d(W : A^-1) = -A^-T W A^-T
        inv_t = np.linalg.inv(a).T
        expect = weights[k, 0, 0] * np.linalg.det(a) * inv_t - inv_t @ weights[k] @ inv_t
        assert np.allclose(grad[k], expect, atol=1e-8)


def test_gradient_through_polar_in_a_serial_loop(mode):
    """Decompositions inside a run-time loop: their many locals are saved and restored."""
    a = ti.Matrix.field(3, 3, ti.f64, shape=2, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute():
        for i in a:
            m = a[i]
            for _ in range(2):
                r, p = ti.polar_decompose(m)
                m = p + 0.1 * r
            loss[None] += (m * m).sum()

    a.from_numpy(well_conditioned(3, seed=80))
    with ti.ad.Tape(loss=loss):
        compute()

    def run_loss():
        loss[None] = 0
        compute()
        return loss[None]

    expect = finite_difference(run_loss, a)
    assert np.allclose(a.grad.to_numpy(), expect, atol=1e-6 * np.abs(expect).max(), rtol=0)
