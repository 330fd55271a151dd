"""Helpers for the tests that follow Taichi's own autodiff tests (tests/README.md maps them):
a program's reverse-mode gradient (Tape) and forward-mode tangent (FwdMode), each against
central finite differences in f64 on the same program."""
from __future__ import annotations

import numpy as np

import tinyad as ti
from tests.gradcheck import finite_difference


def fresh_loss(run, loss):
    """run() from a zeroed loss, -> the loss (a float)."""
    loss.fill(0)
    run()
    return float(loss.to_numpy().sum())


def tape_gradients(run, loss, params):
    for p in params:
        p.grad.fill(0)
    loss.fill(0)
    with ti.ad.Tape(loss=loss):
        run()
    return [p.grad.to_numpy().astype(np.float64) for p in params]


def assert_tape_matches_fd(run, loss, params, rtol=1e-6, atol=1e-8):
    """The Tape's gradient of every param against central differences; at least one of the
    true gradients is not zero (else the test could not fail)."""
    start = [p.to_numpy() for p in params]
    got = tape_gradients(run, loss, params)
    want = [finite_difference(lambda: fresh_loss(run, loss), p) for p in params]
    for p, values in zip(params, start):
        p.from_numpy(values)
    for p, g, w in zip(params, got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{p.name}.grad")
    assert any(np.any(w != 0) for w in want), "every true gradient is zero"
    return got


def assert_fwd_matches_fd(run, loss, param, rtol=1e-6, atol=1e-8, eps=1e-6):
    """FwdMode's tangent of the loss along a fixed direction of `param` against the central
    difference along it."""
    base = param.to_numpy().astype(np.float64)
    direction = np.linspace(0.5, 1.5, base.size).reshape(base.shape)
    loss.fill(0)
    with ti.ad.FwdMode(loss=loss, param=param, seed=list(direction.ravel())):
        run()
    got = float(loss.dual.to_numpy().sum())
    values = []
    for sign in (1, -1):
        param.from_numpy((base + sign * eps * direction).astype(param.dtype.np))
        values.append(fresh_loss(run, loss))
    param.from_numpy(base.astype(param.dtype.np))
    want = (values[0] - values[1]) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    assert want != 0, "the true tangent is zero"
    return got
