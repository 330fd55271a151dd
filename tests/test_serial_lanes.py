"""Serial reductions as lanes (interp/serial_lanes.py) against the scalar evaluator and against
analytic values: the same values bit for bit (f32 sums round in the scalar loop's order), the
same checks, and a 10⁷-iteration loop (Taichi's test_large_for_loops_*) in seconds."""
import time

import numpy as np
import pytest

import tinyad as ti
from tinyad.interp import lanes, serial_lanes
from tinyad.interp.evaluator import Program


def _reduction_program(n):
    """Sums into a scalar, into indexed elements (two atomics per iteration), through a perfect
    nest with reversed bounds, and a local assigned before it is read."""
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    w = ti.field(ti.f32, shape=(), needs_grad=True)
    bins = ti.field(ti.f32, shape=5, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def reduce(m: ti.i32):
        for p in range(2):
            for j in range(m):
                for k in range(3):
                    v = ti.sin(x[j]) * w[None] + 0.1 * k
                    bins[(j + k + p) % 5] += v
                    bins[j % 5] += 0.5 * v * v
            for j in range(n):
                loss[None] += x[j] * x[j] * w[None]

    @ti.kernel
    def total():
        for b in range(5):
            loss[None] += bins[b] * (b + 1.0)

    x.from_numpy(np.linspace(-1.0, 2.0, n).astype(np.float32))
    w[None] = 0.7
    return x, w, bins, loss, reduce, total


def _run(n, use_lanes, monkeypatch):
    monkeypatch.setenv(lanes.ENV_SWITCH, "1" if use_lanes else "0")
    x, w, bins, loss, reduce, total = _reduction_program(n)
    with ti.ad.Tape(loss=loss):
        reduce(n)
        total()
    return [f.to_numpy().copy() for f in (bins, loss, x.grad, w.grad)]


def test_plan_accepts_reductions_and_refuses_carried_values():
    x = ti.field(ti.f32, shape=100)
    s = ti.field(ti.f32, shape=())
    y = ti.field(ti.f32, shape=100)
    n = ti.field(ti.i32, shape=())

    # (a kernel's top-level loop is parallel: each serial loop sits inside one)
    @ti.kernel
    def reduction():
        for _ in range(1):
            for j in range(100):
                t = x[j] * 2.0
                s[None] += t

    @ti.kernel
    def carried():      # t is read before this iteration assigns it
        for _ in range(1):
            t = 0.0
            for j in range(100):
                s[None] += t
                t = x[j]

    @ti.kernel
    def reads_what_it_writes():   # a prefix sum: iteration j reads j - 1's store
        for _ in range(1):
            for j in range(1, 100):
                y[j] += y[j - 1]

    @ti.kernel
    def stores():
        for _ in range(1):
            for j in range(100):
                y[j] = x[j]

    def serial_loop(kernel):
        k = kernel.ir
        return k, next(s for s in ti_ir.walk_stmts(k.body)
                       if isinstance(s, ti_ir.For) and not s.parallel)

    @ti.kernel
    def bounded_by_a_field():     # its bound is a checked read: the scalar loop makes it
        for _ in range(1):
            for j in range(n[None]):
                s[None] += x[j]

    from tinyad.core import ir as ti_ir
    kernel, loop = serial_loop(reduction)
    assert serial_lanes.plan(loop, kernel) is not None
    for refused in (carried, reads_what_it_writes, stores, bounded_by_a_field):
        kernel, loop = serial_loop(refused)
        assert serial_lanes.plan(loop, kernel) is None, refused


@pytest.mark.parametrize("check", ["error", "off"])
def test_values_and_gradients_equal_the_scalar_paths_bit_for_bit(check, monkeypatch):
    ti.init(mode="interp", check=check)
    scalar = _run(200, False, monkeypatch)
    ti.init(mode="interp", check=check)
    laned = _run(200, True, monkeypatch)
    for a, b in zip(scalar, laned):
        np.testing.assert_array_equal(a, b)


def test_gradients_match_the_analytic_ones(monkeypatch):
    ti.init(mode="interp", default_fp=ti.f64)
    monkeypatch.setenv(lanes.ENV_SWITCH, "1")
    n = 300
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def energy():
        for _ in range(1):
            for j in range(n):
                loss[None] += ti.exp(0.5 * x[j]) * x[j]

    values = np.linspace(-1.0, 1.0, n)
    x.from_numpy(values)
    with ti.ad.Tape(loss=loss):
        energy()
    np.testing.assert_allclose(loss[None], np.sum(np.exp(0.5 * values) * values), rtol=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), np.exp(0.5 * values) * (1 + 0.5 * values),
                               rtol=1e-12)


def test_an_out_of_bounds_read_names_the_users_line():
    ti.init(mode="interp")
    x = ti.field(ti.f32, shape=50)
    s = ti.field(ti.f32, shape=())

    @ti.kernel
    def overrun():
        for _ in range(1):
            for j in range(60):
                s[None] += x[j]

    with pytest.raises(ti.TinyadIndexError) as error:
        overrun()
    assert "s[None] += x[j]" in str(error.value)


def test_the_checker_still_sees_a_read_the_loop_makes():
    """Rule 1 across kernels: the loop reads x, a later kernel overwrites it inside the Tape."""
    ti.init(mode="interp")
    x = ti.field(ti.f32, shape=100, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def square_sum():
        for _ in range(1):
            for j in range(100):
                loss[None] += x[j] * x[j]

    @ti.kernel
    def overwrite():
        for j in range(100):
            x[j] = 2.0

    x.fill(1.0)
    with pytest.raises(ti.ReadThenOverwriteRuleError):
        with ti.ad.Tape(loss=loss):
            square_sum()
            overwrite()


def test_ten_million_iterations_finish_in_seconds():
    """Taichi's test_large_for_loops_*: 5 parallel iterations of a 2000 x 1000 serial nest."""
    ti.init(mode="interp")
    x = ti.field(ti.f32, shape=(), needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def large():
        for i in range(5):
            for j in range(2000):
                for k in range(1000):
                    loss[None] += ti.sin(x[None]) + 1.0

    start = time.perf_counter()
    with ti.ad.Tape(loss=loss):
        large()
    assert loss[None] == 1e7 and x.grad[None] == 1e7
    assert time.perf_counter() - start < 60


def test_the_compiled_program_uses_lanes_for_the_serial_loop(monkeypatch):
    ti.init(mode="interp")
    x = ti.field(ti.f32, shape=100)
    s = ti.field(ti.f32, shape=())

    @ti.kernel
    def reduction():
        for _ in range(1):
            for j in range(100):
                s[None] += x[j]

    flushes = []
    original = serial_lanes._Buffered.flush
    monkeypatch.setattr(serial_lanes._Buffered, "flush",
                        lambda self: (flushes.append(1), original(self)))
    x.fill(0.25)
    Program(reduction.ir).run(())
    assert s[None] == 25.0 and flushes == [1]


@pytest.mark.parametrize("factor", [2.0, 3.0])
def test_a_custom_gradient_check_sees_the_elements_a_laned_loop_reads(mode, factor):
    """Plain memory skips the scalar pass over each element; the custom gradient check's
    memory (it watches accesses) does not: its inputs are every x the reduction reads, so a
    wrong gradient is caught and the right one matches the analytic gradient. (The check
    replays the primal in the interpreter in both modes.)"""
    ti.init(mode=mode, default_fp=ti.f64)
    n = 100
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def cubes():
        for _ in range(1):
            for j in range(n):
                loss[None] += x[j] ** 3

    @ti.kernel
    def cubes_grad():
        for j in range(n):
            x.grad[j] += factor * x[j] ** 2 * loss.grad[None]

    @ti.ad.grad_replaced
    def forward():
        cubes()

    @ti.ad.grad_for(forward)
    def backward():
        cubes_grad()

    values = np.linspace(-1.0, 1.0, n)
    x.from_numpy(values)
    if factor == 3.0:
        with ti.ad.Tape(loss):
            forward()
        np.testing.assert_allclose(x.grad.to_numpy(), 3 * values ** 2, rtol=1e-12)
        return
    with pytest.raises(ti.CustomGradientRuleError) as caught:
        with ti.ad.Tape(loss):
            forward()
    assert f"on forward's inputs (x (all {n}))" in str(caught.value)
