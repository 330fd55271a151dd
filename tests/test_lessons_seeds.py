"""Lessons 11 onwards (checkpointing, forward mode, derivatives of funcs, forward-first
building, control flow on a counter) run start to finish in each mode, as `tinyad lesson N
--no-pause` does, and their numbers agree with an independent truth (numpy, a formula, sympy)
computed here, not taken from the lesson."""
import io
import math

import numpy as np
import pytest

from tinyad import lessons


def run_lesson(key, mode, monkeypatch):
    monkeypatch.setenv("TINYAD_MODE", mode)
    out = io.StringIO()
    namespace = lessons.run(key, pause=False, out=out)
    return namespace, out.getvalue()


def _central_difference(f, x0, h=1e-6):
    return np.array([(f(x0 + h * e) - f(x0 - h * e)) / (2 * h) for e in np.eye(len(x0))])


def test_checkpointing(mode, monkeypatch):
    ns, out = run_lesson("checkpointing", mode, monkeypatch)
    steps, dt = 6, 0.1
    start = 0.5 + 0.25 * np.arange(4)

    def loss(x0):
        xs = x0.copy()
        for _ in range(steps):
            xs = xs * (1 + dt * np.sin(xs))
        return (xs ** 2).sum()

    truth = _central_difference(loss, start)
    silent = np.array([float(v) for v in
                       out.split("x.grad[0, :] = [")[1].split("]")[0].split()])
    assert not np.allclose(silent, truth, atol=1e-2)          # the overwritten scratch
    assert "Global Data Access Rule 2: force[0]" in out
    assert np.allclose(ns["checkpointed_grad"], truth, rtol=1e-6)   # the checkpointed one
    assert "all 28 elements agree with sympy" in out
    assert "4 of 28 elements disagree with sympy" in out      # the forgetful checkpoint


def test_forward_mode(mode, monkeypatch):
    ns, out = run_lesson("forward_mode", mode, monkeypatch)
    assert np.allclose(ns["y"].dual.to_numpy(), np.arange(5) * math.cos(0.3), rtol=1e-6)
    assert "out.dual = [0. 0. 0.]  (silently zero)" in out
    assert "Missing dual on the path: mid" in out
    k = np.arange(1, 4)
    assert np.allclose(ns["out"].dual.to_numpy(), k * np.sin(2 * k * 0.5), rtol=1e-5)
    assert "all 1 elements agree with sympy" in out
    n = ns["n"]
    x = np.linspace(0.1, 2.0, n)
    column_truth = np.arange(1, n + 1) * np.cos(np.arange(1, n + 1) * 0.3)
    row_truth = 2 * x * np.sin(x) + x ** 2 * np.cos(x)
    results = ns["results"]
    for name, truth in [("column, forward", column_truth), ("column, reverse", column_truth),
                        ("row, reverse", row_truth), ("row, forward", row_truth)]:
        assert np.allclose(results[name][0], truth, rtol=1e-12), name
    sweeps = {name: result[1] for name, result in results.items()}
    assert sweeps == {"column, forward": 1, "column, reverse": n,
                      "row, reverse": 1, "row, forward": n}


def test_function_derivatives(mode, monkeypatch):
    ns, out = run_lesson("function_derivatives", mode, monkeypatch)
    assert "f'(2) = 25.0" in out                              # the stand-in's silent sum
    assert "Gradient at two parameter values: x.grad" in out
    points = np.array([-1.0, 0.0, 1.0, 2.0])
    assert np.allclose(ns["first"].to_numpy(), 3 * points ** 2 + 4 * points - 3)
    assert np.allclose(ns["second"].to_numpy(), 6 * points + 4)
    p0, p1 = 0.5, 1.5
    jacobian = np.array([[p1, p0], [math.cos(p0), 0.0]])
    assert np.allclose(ns["jv"][None].to_numpy(), jacobian @ [1.0, 2.0], rtol=1e-6)
    assert np.allclose(ns["jtu"][None].to_numpy(), jacobian.T @ [3.0, 4.0], rtol=1e-6)
    w, v = np.array([0.3, -0.7, 1.1, 0.5]), np.array([1.0, 0.0, -1.0, 2.0])
    hessian = np.diag(-np.sin(w))                  # L = sum w_i^2 w_(i+1) + sin w_i
    for i in range(3):
        hessian[i, i] += 2 * w[i + 1]
        hessian[i, i + 1] += 2 * w[i]
        hessian[i + 1, i] += 2 * w[i]
    assert np.allclose(ns["w"].grad.dual.to_numpy(), hessian @ v, rtol=1e-12)
    assert np.allclose(ns["hv"], hessian @ v, rtol=1e-12)


def _heat(kappa, n=12, steps=16):
    u = np.exp(-0.5 * (np.arange(n) - n / 2) ** 2)
    left, right = np.maximum(np.arange(n) - 1, 0), np.minimum(np.arange(n) + 1, n - 1)
    for _ in range(steps):
        u = u + kappa * (u[left] - 2 * u + u[right])
    return u


def test_forward_first(mode, monkeypatch):
    ns, out = run_lesson("forward_first", mode, monkeypatch)
    assert "all 205 elements agree with sympy" in out
    assert "all 1 elements agree with finite differences" in out
    assert "Global Data Access Rule 1: ring[0, 0] was read" in out
    target = _heat(0.2)
    assert np.allclose(ns["target"].to_numpy(), target, rtol=1e-12)
    history = ns["history"]
    assert history[0] == pytest.approx(((_heat(0.1) - target) ** 2).sum(), rel=1e-10)
    assert ns["kappa"][None] == pytest.approx(0.2, abs=1e-6) and history[-1] < 1e-12


def _running_mean_gradient(values, weights):
    """d/d data of sum over rows of m^2, m = the running mean with these per-column weights."""
    rows, cols = values.shape
    grad = np.zeros_like(values)
    for row in range(rows):
        m, dm = 0.0, np.zeros(cols)        # dm: d m / d data[row, :]
        for col in range(cols):
            m_prev = values[row, 0] if col == 0 else m
            dm_prev = np.eye(cols)[0] if col == 0 else dm
            m = m_prev + (values[row, col] - m_prev) * weights[col]
            dm = dm_prev * (1 - weights[col]) + np.eye(cols)[col] * weights[col]
        grad[row] = 2 * m * dm
    return grad


def test_control_flow_on_a_counter(mode, monkeypatch):
    ns, out = run_lesson("control_flow_on_a_counter", mode, monkeypatch)
    values = np.arange(8, dtype=np.float64).reshape(2, 4) / 4
    truth = _running_mean_gradient(values, [1.0, 1 / 2, 1 / 3, 1 / 4])
    assert np.allclose(truth, 2 * values.mean(axis=1, keepdims=True) / 4)   # the same, by hand
    # Taichi's silent gradient: the adjoint replays count = 4, so every column gets weight
    # 1/5 at the forward's means: d m_3 / d data[c] = 0.2 * 0.8^(3 - c)
    silent = 2 * values.mean(axis=1, keepdims=True) * 0.2 * 0.8 ** (3 - np.arange(4))
    printed = out.split("data.grad =\n")[1].split("\n-- lesson")[0]
    numbers = np.array(printed.replace("[", " ").replace("]", " ").split(), dtype=float)
    assert np.allclose(numbers, silent.ravel(), atol=1e-6)
    assert not np.allclose(silent, truth, atol=1e-2)
    assert "Global Data Access Rule 1: count[0] was read" in out
    assert "reads count[row]" in out
    assert np.allclose(ns["data"].grad.to_numpy(), truth, rtol=1e-6)
    assert "all 8 elements agree with sympy" in out
