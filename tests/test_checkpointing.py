"""Checkpointing with ti.ad.grad_replaced / grad_for under the rule checks, in both modes.

A grad_replaced step reuses one scratch field for every step; its grad_for recomputes the
scratch before running the adjoints. That program is correct, so the checks must pass it; a
grad_for that forgets to recompute replays stale values and must be caught; and a
grad_replaced function that overwrites what an ordinary taped kernel will replay is still
reported."""
from __future__ import annotations

import numpy as np
import pytest

import tinyad as ti

N, STEPS, DT = 4, 6, 0.1
START = 0.5 + 0.25 * np.arange(N)


def true_gradient():
    """d/dx0 of sum(x_T^2) with x_(t+1) = x_t (1 + dt sin x_t), by central differences in f64."""
    def loss(x0):
        xs = x0.copy()
        for _ in range(STEPS):
            xs = xs * (1 + DT * np.sin(xs))
        return (xs ** 2).sum()
    h = 1e-6
    return np.array([(loss(START + h * e) - loss(START - h * e)) / (2 * h) for e in np.eye(N)])


def program(recompute: bool):
    x = ti.field(ti.f64, shape=(STEPS + 1, N), needs_grad=True)
    force = ti.field(ti.f64, shape=N, needs_grad=True)     # one scratch for every step
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute_force(t: ti.i32):
        for i in range(N):
            force[i] = ti.sin(x[t, i])

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(N):
            x[t + 1, i] = x[t, i] * (1 + DT * force[i])

    @ti.kernel
    def compute_loss():
        for i in range(N):
            loss[None] += x[STEPS, i] ** 2

    @ti.ad.grad_replaced
    def step(t):
        compute_force(t)
        advance(t)

    @ti.ad.grad_for(step)
    def step_grad(t):
        if recompute:
            compute_force(t)
        advance.grad(t)
        compute_force.grad(t)

    def run():
        x.from_numpy(np.vstack([START, np.zeros((STEPS, N))]))
        with ti.ad.Tape(loss=loss):
            for t in range(STEPS):
                step(t)
            compute_loss()
        return x.grad.to_numpy()[0]
    return run


def test_a_checkpoint_that_recomputes_passes_the_checks(mode):
    np.testing.assert_allclose(program(recompute=True)(), true_gradient(), rtol=1e-7)


def test_a_checkpoint_that_forgets_to_recompute_is_caught(mode):
    """advance's adjoint would read the last step's force: the replay witness sees it."""
    with pytest.raises(ti.ReplayDivergenceRuleError, match=r"force\[0\]"):
        program(recompute=False)()


def test_a_grad_replaced_function_that_overwrites_a_taped_read_is_reported(mode):
    """What happens inside grad_replaced is its own, but what it does to the reads of the
    Tape's other kernels is not: y's adjoint replays x, which the custom step changes."""
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def square_sum():
        for i in x:
            loss[None] += x[i] * x[i]

    @ti.kernel
    def shift():
        for i in x:
            x[i] += 1.0

    @ti.ad.grad_replaced
    def custom_shift():
        shift()

    @ti.ad.grad_for(custom_shift)
    def custom_shift_grad():
        pass

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ti.AutodiffRuleError, match=r"x\[0\]"):
        with ti.ad.Tape(loss=loss):
            square_sum()
            custom_shift()
