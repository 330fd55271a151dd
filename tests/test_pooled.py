"""Kernels with parallel loops compiled as serial segments run by a thread pool
(compile/pooledsource.py, compile/pool.py): locals that cross segments, sums after a loop, and
the pool itself."""
import threading
import time

import numpy as np
import pytest

import tinyad as ti
from tinyad.compile.pool import ChunkPool, ThreadChoice


def test_locals_cross_segments_and_loops_see_them(mode, monkeypatch):
    monkeypatch.setenv("TINYAD_PARALLEL_MIN", "0")     # threads even for small loops
    n = 3000
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)
    total = ti.field(ti.f64, shape=(), needs_grad=True)
    out = ti.field(ti.f64, shape=())

    @ti.kernel
    def k(a: ti.f64):
        c = a * 2.0                 # serial, before: read by both loops
        for i in x:
            y[i] = x[i] * c
        d = c + 1.0                 # serial, between the loops
        for i in x:
            y[i] += d * x[i]
            total[None] += y[i] ** 2
        out[None] = d * 3.0         # serial, after

    base = np.linspace(-1, 1, n)
    x.from_numpy(base)
    with ti.ad.Tape(loss=total):
        k(0.75)
    c, d = 1.5, 2.5
    want_y = base * c + d * base
    np.testing.assert_allclose(y.to_numpy(), want_y, rtol=1e-12)
    assert total[None] == pytest.approx(float(np.sum(want_y ** 2)), rel=1e-12)
    assert out[None] == pytest.approx(3 * d)
    # d total / d x_i = 2 y_i (c + d): analytic
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * want_y * (c + d), rtol=1e-12)
    if mode == "fast":
        source = k._traced_for_inspection()._programs["primal"].source
        assert source.count("_tinyad_pool.run(") == 2 and "_c_c = np.zeros(1" in source


def test_a_kernel_with_a_return_value_keeps_the_parfors_module(mode):
    n = 1000
    x = ti.field(ti.f64, shape=n)

    @ti.kernel
    def k() -> ti.f64:
        for i in x:
            x[i] = i * 0.5
        return x[n - 1]

    assert k() == pytest.approx((n - 1) * 0.5)
    if mode == "fast":
        assert "prange(" in k._traced_for_inspection()._programs["primal"].source


def test_the_pool_runs_every_chunk_once_and_raises_a_chunks_error():
    pool = ChunkPool(1)
    seen = []
    lock = threading.Lock()

    def chunk(c, chunks, out):
        with lock:
            seen.append((c, chunks))
        out[c] = c * 10

    out = np.zeros(5)
    pool.run(chunk, 5, (out,), nthreads=2)
    assert sorted(seen) == [(c, 5) for c in range(5)]
    np.testing.assert_array_equal(out, [0, 10, 20, 30, 40])

    def failing(c, chunks):
        if c == 1:                   # on a worker or on this thread: raised here either way
            raise IndexError("chunk 1")

    with pytest.raises(IndexError, match="chunk 1"):
        pool.run(failing, 2, (), nthreads=2)
    pool.run(chunk, 5, (out,), nthreads=2)        # still usable afterwards


@pytest.mark.parametrize("threads_cost_s, expect_threaded", [(0.004, False), (0.0, True)])
def test_a_segment_runs_on_threads_only_where_they_measure_faster(threads_cost_s,
                                                                  expect_threaded):
    """ThreadChoice times its segment's first launches both ways and keeps the faster; every
    launch runs the same chunks, whoever runs them."""
    class TimedPool:     # a threaded launch takes threads_cost_s, one alone 4 ms less that
        def __init__(self):
            self.used = []

        def run(self, fn, chunks, args, nthreads):
            self.used.append(nthreads)
            time.sleep(threads_cost_s if nthreads > 1 else 0.004 - threads_cost_s)
            for c in range(chunks):
                fn(c, chunks, *args)

    pool, choice = TimedPool(), ThreadChoice()
    out = np.zeros(4)

    def chunk(c, chunks, out):
        out[c] += c

    probes = 2 * ThreadChoice.PROBES
    for _ in range(probes + 5):
        choice.run(pool, chunk, 4, (out,), 2)
    assert pool.used[:probes] == [1, 2] * ThreadChoice.PROBES       # alternating probes
    assert pool.used[probes:] == [2 if expect_threaded else 1] * 5
    np.testing.assert_array_equal(out, np.arange(4) * (probes + 5))
