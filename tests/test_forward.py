"""Forward mode (ti.ad.FwdMode): tangents against central finite differences in f64, per
statement kind, in both modes; Taichi's FwdMode API and messages; the missing-dual check."""
import numpy as np
import pytest

import tinyad as ti
from tinyad.runtime import runtime

EPS = 1e-6


def _snapshot():
    return [(f, f.to_numpy()) for f in runtime.fields if f.is_placed]


def _restore(snapshot):
    for f, values in snapshot:
        f.from_numpy(values)


def directional_fd(run, outputs, param, seed):
    """d(outputs)/d(param) . seed by central differences, every field restored afterwards."""
    start = _snapshot()
    base = param.to_numpy().astype(np.float64)
    direction = np.asarray(seed, dtype=np.float64).reshape(base.shape)
    results = []
    for sign in (1, -1):
        _restore(start)
        param.from_numpy(base + sign * EPS * direction)
        run()
        results.append([o.to_numpy().astype(np.float64) for o in outputs])
    _restore(start)
    return [(plus - minus) / (2 * EPS) for plus, minus in zip(*results)]


def tangents(run, outputs, param, seed):
    """The duals FwdMode computes, from the same starting values; fields restored afterwards."""
    start = _snapshot()
    with ti.ad.FwdMode(loss=outputs, param=param, seed=seed):
        run()
    duals = [o.dual.to_numpy() for o in outputs]
    _restore(start)
    return duals


def assert_tangents_match_fd(run, outputs, param, seed, nonzero=True):
    got = tangents(run, outputs, param, seed)
    want = directional_fd(run, outputs, param, seed)
    for o, g, w in zip(outputs, got, want):
        assert np.allclose(g, w, rtol=1e-6, atol=1e-7), f"{o.name}.dual = {g}, FD says {w}"
    assert not nonzero or any(np.any(w != 0) for w in want), "all true tangents are zero"


def fields(*names, shape=4, needs_dual=True, values=None):
    out = []
    for k, name in enumerate(names):
        f = ti.field(ti.f64, shape=shape, needs_dual=needs_dual, name=name)
        rng = np.random.default_rng(k + 1)
        f.from_numpy(values[k] if values else rng.uniform(0.2, 1.2, size=f.shape))
        out.append(f)
    return out


SEED4 = [0.3, -1.0, 0.7, 0.5]


# ---- statement kinds ------------------------------------------------------------------------------

def test_assign_chain_of_math(mode):
    x, y = fields("x", "y")

    @ti.kernel
    def k():
        for i in x:
            a = ti.sin(x[i]) * x[i]
            b = ti.exp(a) / (1.0 + x[i] * x[i])
            y[i] = ti.sqrt(b) + ti.tanh(a) * ti.atan2(a, x[i]) + x[i] ** 2.5

    assert_tangents_match_fd(k, [y], x, SEED4)


def test_plain_store_sets_the_tangent(mode):
    """Taichi accumulates the tangent of y[i] = e; the derivative of a store is e's tangent."""
    x, y = fields("x", "y")

    @ti.kernel
    def k():
        for i in x:
            y[i] = x[i] * x[i]
            y[i] = ti.sin(y[i]) + x[i]

    assert_tangents_match_fd(k, [y], x, SEED4)
    x.dual.fill(0)
    with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 0, 0, 0]):
        k()
    xv = x[0]
    assert y.dual[0] == pytest.approx(np.cos(xv * xv) * 2 * xv + 1)


def test_atomic_add_and_sub(mode):
    x, = fields("x")
    loss = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        for i in x:
            loss[None] += x[i] ** 3
            loss[None] -= 0.5 * ti.exp(x[i])

    assert_tangents_match_fd(k, [loss], x, SEED4)


def test_atomic_min_max_pass_the_winners_tangent(mode):
    x, = fields("x", values=[np.array([0.4, 1.1, 0.2, 0.9])])
    hi = ti.field(ti.f64, shape=(), needs_dual=True)
    lo = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        for i in x:
            ti.atomic_max(hi[None], x[i] * 2.0)
            ti.atomic_min(lo[None], x[i] * x[i])

    lo[None] = 10.0
    assert_tangents_match_fd(k, [hi, lo], x, SEED4)
    [dhi, dlo] = tangents(k, [hi, lo], x, SEED4)
    assert dhi == pytest.approx(2.0 * SEED4[1]) and dlo == pytest.approx(2 * 0.2 * SEED4[2])


def test_atomic_max_against_a_constant_zeroes_the_tangent(mode):
    x, = fields("x", shape=())
    y = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        y[None] = x[None]
        ti.atomic_max(y[None], 5.0)       # 5 wins: y no longer depends on x

    assert_tangents_match_fd(k, [y], x, [1.0], nonzero=False)
    assert tangents(k, [y], x, None)[0] == 0.0
    x[None] = 6.0                         # now x wins
    assert_tangents_match_fd(k, [y], x, [1.0])


def test_if_branches(mode):
    x, y = fields("x", "y", values=[np.array([0.1, 0.5, 0.9, 0.35]), np.zeros(4)])

    @ti.kernel
    def k():
        for i in x:
            if x[i] > 0.4:
                y[i] = x[i] ** 3
            else:
                y[i] = ti.cos(x[i]) * ti.select(x[i] > 0.2, x[i], 2.0)

    assert_tangents_match_fd(k, [y], x, SEED4)


def test_serial_for_inside_a_parallel_loop(mode):
    x, y = fields("x", "y")

    @ti.kernel
    def k():
        for i in y:
            acc = x[i]
            for j in range(4):
                acc = ti.sin(acc) * x[j] + acc * 0.5
            y[i] = acc

    assert_tangents_match_fd(k, [y], x, SEED4)


def test_while_loop(mode):
    x, y = fields("x", "y")

    @ti.kernel
    def k():
        for i in y:
            v = x[i]
            n = 0
            while n < 3:
                v = v * v * 0.5 + x[i]
                n += 1
            y[i] = v

    assert_tangents_match_fd(k, [y], x, SEED4)


def test_serial_kernel_over_several_launches_and_a_reassigned_argument(mode):
    x, = fields("x", shape=())
    y = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def step(s: ti.f64):
        s = s * x[None]
        y[None] = y[None] * ti.cos(y[None]) + s

    def run():
        y[None] = 0.3
        for _ in range(3):
            step(1.5)

    assert_tangents_match_fd(run, [y], x, [1.0])


def test_vector_and_matrix_fields(mode):
    v = ti.Vector.field(2, ti.f64, shape=3, needs_dual=True)
    m = ti.Matrix.field(2, 2, ti.f64, shape=3, needs_dual=True)
    v.from_numpy(np.random.default_rng(3).uniform(0.2, 1.0, (3, 2)))

    @ti.kernel
    def k():
        for i in v:
            m[i] = v[i].outer_product(v[i]) * ti.sin(v[i][0])

    seed = np.random.default_rng(4).uniform(-1, 1, 6).tolist()
    assert_tangents_match_fd(k, [m], v, seed)


def test_f32_fields_get_f32_tangents(mode):
    x = ti.field(ti.f32, shape=(), needs_dual=True)
    y = ti.field(ti.f32, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        y[None] = ti.exp(2.0 * x[None])

    x[None] = 0.25
    with ti.ad.FwdMode(loss=y, param=x):
        k()
    assert y.dual[None] == pytest.approx(2 * np.exp(0.5), rel=1e-6)


# ---- Taichi's FwdMode API -----------------------------------------------------------------------

def test_taichi_docs_example(mode):
    """The example of Taichi's differentiable-programming docs: dy/dx_0 and dy/dx_1 of
    y[i] += i * sin(x[j])."""
    x = ti.field(dtype=ti.f64, shape=2, needs_dual=True)
    y = ti.field(dtype=ti.f64, shape=5, needs_dual=True)

    @ti.kernel
    def compute_y():
        for i in range(5):
            for j in range(2):
                y[i] += i * ti.sin(x[j])

    x.from_numpy(np.array([0.3, 0.8]))
    for j, seed in enumerate(([1.0, 0.0], [0.0, 1.0])):
        with ti.ad.FwdMode(loss=y, param=x, seed=seed):
            compute_y()
        assert np.allclose(y.dual.to_numpy(), np.arange(5) * np.cos(x[j]))


def test_scalar_param_defaults_its_seed_and_the_seed_is_cleared_on_exit(mode):
    x = ti.field(ti.f64, shape=(), needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        y[None] = x[None] ** 2

    x[None] = 3.0
    with ti.ad.FwdMode(loss=y, param=x):
        k()
        assert x.dual[None] == 1.0
    assert y.dual[None] == 6.0 and x.dual[None] == 0.0


def test_duals_cleared_on_entry_unless_asked_not_to(mode):
    x = ti.field(ti.f64, shape=(), needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_dual=True)
    z = ti.field(ti.f64, shape=(), needs_dual=True)
    z.dual[None] = 7.0
    with ti.ad.FwdMode(loss=y, param=x):
        pass
    assert z.dual[None] == 0.0
    z.dual[None] = 7.0
    with ti.ad.FwdMode(loss=y, param=x, clear_gradients=False):
        pass
    assert z.dual[None] == 7.0


def test_fwdmode_errors(mode):
    x = ti.field(ti.f64, shape=3, needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_dual=True)
    plain = ti.field(ti.f64, shape=())
    with pytest.raises(ti.TinyadError, match="`seed` is not set for non 0-D field"):
        with ti.ad.FwdMode(loss=y, param=x):
            pass
    with pytest.raises(ti.TinyadError, match="the seed has 2 values but x has 3 elements"):
        with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0]):
            pass
    with pytest.raises(ti.TinyadError, match="needs_dual=True"):
        with ti.ad.FwdMode(loss=plain, param=x, seed=[1, 0, 0]):
            pass
    fwd = ti.ad.FwdMode(loss=y, param=x, seed=[1, 0, 0])
    with fwd:
        with pytest.raises(ti.TinyadError, match="do not nest"):
            with ti.ad.FwdMode(loss=y, param=x, seed=[1, 0, 0]):
                pass
    with pytest.raises(ti.TinyadError, match="entered only once"):
        with fwd:
            pass


def test_lazy_dual_gives_every_float_field_a_dual(mode):
    x = ti.field(ti.f64, shape=())
    y = ti.field(ti.f64, shape=())
    n = ti.field(ti.i32, shape=())
    ti.root.lazy_dual()
    assert x.dual is not None and y.dual is not None and n.dual is None

    @ti.kernel
    def k():
        y[None] = ti.log(x[None])

    x[None] = 2.0
    with ti.ad.FwdMode(loss=y, param=x):
        k()
    assert y.dual[None] == pytest.approx(0.5)


def test_duals_placed_beside_their_fields_as_taichi_allows(mode):
    """ti.root.place(x, x.dual, ...) (DFSPH_difftaichi's trial 19), and a kernel that reads back
    what it stored: z = x; x = z + z y; loss = x + y, so d loss / d x = 1 + y. Taichi 1.7.4
    prints z.dual 0 after `z = x`, and loss.dual 0."""
    x = ti.field(ti.f64, needs_dual=True)
    y = ti.field(ti.f64, needs_dual=True)
    z = ti.field(ti.f64, needs_dual=True)
    ti.root.place(x, x.dual, y, y.dual, z, z.dual)
    v = ti.Vector.field(3, ti.f64, needs_dual=True)
    ti.root.dense(ti.ij, (2, 2)).place(v, v.dual)
    loss = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def func():
        z[None] = x[None]
        x[None] = z[None] + z[None] * y[None]

    @ti.kernel
    def get_loss():
        loss[None] = x[None] + y[None]

    x[None], y[None] = 1.0, 0.25
    with ti.ad.FwdMode(loss=loss, param=x):
        func()
        get_loss()
    assert loss[None] == pytest.approx(1.25 + 0.25)
    assert loss.dual[None] == pytest.approx(1.25)
    assert v.dual.shape == (2, 2)


def test_tangent_ir_points_at_the_users_lines(mode):
    x = ti.field(ti.f64, shape=(), needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        y[None] = ti.sin(x[None])

    text = str(k.fwd.ir)
    line = k.fn.__code__.co_firstlineno + 2
    assert "kernel k_fwd():" in text
    assert "y.dual[] = cos(x[]) * x.dual[]" in text
    assert f"test_forward.py:{line}" in text


# ---- the checker ----------------------------------------------------------------------------------

def test_a_field_without_dual_on_the_tangent_path_is_reported(mode):
    x = ti.field(ti.f64, shape=(), needs_dual=True)
    tmp = ti.field(ti.f64, shape=())
    y = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        tmp[None] = x[None] * 2.0
        y[None] = tmp[None] + x[None]

    x[None] = 1.0
    with pytest.raises(ti.SilentZeroRuleError, match="Missing dual on the path") as info:
        with ti.ad.FwdMode(loss=y, param=x):
            k()
    assert "needs_dual=True" in str(info.value)
    assert info.value.loc.line == k.fn.__code__.co_firstlineno + 2


def test_with_checks_off_the_tangent_is_dropped_as_in_taichi(mode):
    ti.init(mode=mode, check="off", default_fp=ti.f64)
    x = ti.field(ti.f64, shape=(), needs_dual=True)
    tmp = ti.field(ti.f64, shape=())
    y = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def k():
        tmp[None] = x[None] * 2.0
        y[None] = tmp[None] + x[None]

    x[None] = 1.0
    with ti.ad.FwdMode(loss=y, param=x):
        k()
    assert y.dual[None] == 1.0        # the true dy/dx is 3


# ---- verification -----------------------------------------------------------------------------

def _loss_program():
    x = ti.field(ti.f64, shape=3, needs_grad=True, needs_dual=True)
    w = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)
    x.from_numpy(np.array([0.3, 0.7, 1.1]))
    w[None] = 0.4

    @ti.kernel
    def k():
        for i in x:
            loss[None] += ti.sin(x[i] * w[None]) * x[i] ** 2

    return x, w, loss, k


def test_verify_checks_forward_mode_against_sympy_and_fd(mode):
    x, w, loss, k = _loss_program()
    report = ti.ad.verify(k, loss, [x, w], method="both", mode="fwd")
    assert report.ok
    truth = [2 * v * np.sin(v * 0.4) + 0.4 * v * v * np.cos(v * 0.4) for v in (0.3, 0.7, 1.1)]
    ti.ad.verify(k, loss, [x, w], mode="fwd")          # the duals are left as the last sweep
    assert x.dual.to_numpy() == pytest.approx([0, 0, 0])  # (seeds are cleared on exit)
    with ti.ad.FwdMode(loss=loss, param=x, seed=[0, 0, 1]):
        k()
    assert loss.dual[None] == pytest.approx(truth[2])


def test_forward_reverse_check_agrees_on_a_correct_program(mode):
    x, w, loss, k = _loss_program()
    result = ti.ad.forward_reverse_check(k, loss, [x, w], seed=1)
    assert result["jvp"] == pytest.approx(result["vjp"], rel=1e-12) and result["jvp"] != 0
    assert x[0] == 0.3 and loss[None] == 0.0      # fields restored


def test_forward_reverse_check_catches_a_wrong_custom_gradient(mode):
    x, w, loss, k = _loss_program()

    @ti.kernel
    def wrong_grad():
        for i in x:     # d/dx of sin(x w) x^2 with the factor 2 missing
            x.grad[i] += loss.grad[None] * (x[i] * ti.sin(x[i] * w[None]))

    @ti.ad.grad_replaced
    def forward():
        k()

    @ti.ad.grad_for(forward)
    def backward():
        wrong_grad()

    with pytest.raises(ti.GradientMismatchError, match="forward and reverse mode disagree"):
        ti.ad.forward_reverse_check(forward, loss, [x])
