"""Behaviours of Taichi 1.7.4's autodiff tests that tinyad now shares: Tape(validation=True) and the
Global Data Access Rule (test_ad_global_data_access_rule_checker.py, test_ad_gdar_diffmpm.py),
ti.block_local (test_ad_for.py), .grad() of a kernel without gradients (test_ad_demote_dense.py:
refused here), placing x.dual (test_ad_basics_fwd.py), grad_for on an undecorated primal
(test_customized_grad.py). Gradients are compared with analytic values."""
import warnings

import numpy as np
import pytest

import tinyad as ti
from tinyad.taichi_internals import AutodiffMode


def _rule_one_breaker():
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    b = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def breaks_rule_one():
        loss[None] = x[1] * b[None]
        b[None] += 100          # b was read: the adjoint would see 110, not 10

    x.from_numpy(np.arange(4.0))
    b[None] = 10.0
    return loss, breaks_rule_one


def test_validation_reports_a_broken_rule_as_taichis_assertion_error(mode):
    loss, kernel = _rule_one_breaker()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ti.TaichiAssertionError) as info:
            with ti.ad.Tape(loss=loss, validation=True):
                kernel()
    assert isinstance(info.value, ti.ReadThenOverwriteRuleError)   # still tinyad's report
    assert "b[] was read" in str(info.value)


def test_without_validation_the_rule_error_is_tinyads_own(mode):
    loss, kernel = _rule_one_breaker()
    with pytest.raises(ti.ReadThenOverwriteRuleError) as info:
        with ti.ad.Tape(loss=loss):
            kernel()
    assert not isinstance(info.value, AssertionError)


def test_validation_catches_a_write_read_write(mode):
    v = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def p2g():
        for i in v:
            v[i] = 2.0 * i
            loss[None] += v[i] * v[i]
            v[i] = 0.0          # the adjoint would read 0 where the forward read 2i

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ti.TaichiAssertionError):
            with ti.ad.Tape(loss=loss, validation=True):
                p2g()


def test_validation_warns_with_taichis_words_and_records_modes(mode):
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def square():
        loss[None] = x[None] * x[None]

    x[None] = 3.0
    with pytest.warns(UserWarning, match="Debug mode is disabled, autodiff valid check will "
                                         "not work") as record:
        with ti.ad.Tape(loss=loss, validation=True) as tape:
            square()
            assert len(tape.calls) == 1 and tape.modes == [AutodiffMode.VALIDATION]
    assert "tinyad's checks do not need debug=True" in str(record[0].message)
    assert x.grad[None] == pytest.approx(6.0)


def test_block_local_is_a_hint_that_changes_nothing(mode):
    n, m = 8, 3
    a = ti.field(ti.f64, shape=n, needs_grad=True)
    f = ti.field(ti.f64, shape=n - m, needs_grad=True)

    @ti.kernel
    def weights():
        ti.block_local(a)
        for i in range(n - m):
            w = 1.0
            for j in range(m):
                w *= a[i + j]
            f[i] = w

    a.from_numpy(np.linspace(0.5, 2.0, n))
    weights()
    f.grad.fill(1.0)
    weights.grad()
    values = a.to_numpy()
    windows = [values[i:i + m] for i in range(n - m)]
    np.testing.assert_allclose(f.to_numpy(), [np.prod(w) for w in windows])
    expected = np.zeros(n)
    for i, w in enumerate(windows):
        for j in range(m):
            expected[i + j] += np.prod(w) / w[j]
    np.testing.assert_allclose(a.grad.to_numpy(), expected)


def test_grad_of_a_kernel_without_gradients_is_a_warning(mode, capfd):
    """Taichi's test_ad_demote_dense runs this sweep, which computes nothing. Zero is the true
    gradient of a kernel whose outputs have no gradients, so tinyad runs it too, and says at
    the .grad() line that it can only produce zeros (the mistake it usually is: a forgotten
    needs_grad, tests/mistakes/094)."""
    a = ti.field(ti.f64, shape=(7, 3, 2))

    @ti.kernel
    def inc():
        for i, j, k in a:
            a[i, j, k] += 1

    inc()
    inc.grad()
    err = capfd.readouterr().err
    assert "can only produce zeros" in err and "inc.grad()" in err, err
    assert (a.to_numpy() == 1).all()


def test_a_kernel_that_drops_a_gradient_is_a_warning(mode, capfd):
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    plain = ti.field(ti.f64, shape=3)

    @ti.kernel
    def copy():
        for i in x:
            plain[i] = x[i]

    copy()
    copy.grad()
    err = capfd.readouterr().err
    assert "writes no field that has a gradient" in err and "copy.grad()" in err, err
    assert (x.grad.to_numpy() == 0).all()


def test_dual_fields_can_be_placed_like_gradients(mode):
    a = ti.field(ti.f64)
    b = ti.field(ti.f64)
    ti.root.dense(ti.i, 2).place(a, b, a.dual, b.dual)

    @ti.kernel
    def cube():
        for i in a:
            b[i] = a[i] ** 3

    a.from_numpy(np.array([1.0, -2.0]))
    with ti.ad.FwdMode(loss=b, param=a, seed=[1.0, 0.0]):
        cube()
    assert b.dual.to_numpy().tolist() == pytest.approx([3.0, 0.0])
    unplaced = ti.field(ti.f64, shape=2)
    cube()                                   # the layout settles: an unasked dual is dropped
    assert not unplaced.has_dual and not a.has_grad


def test_grad_for_an_undecorated_primal_is_a_runtime_error(mode):
    x = ti.field(ti.f64, shape=2)

    @ti.kernel
    def primal():
        for i in x:
            x[i] += 1

    with pytest.raises(RuntimeError, match="grad_replaced"):
        @ti.ad.grad_for(primal)
        def backward():
            pass
