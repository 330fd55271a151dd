"""Fast mode's lane loops (compile/laneloops.py: a short loop's divisions and square roots run
four iterations at a time) and accumulators (compile/accumulators.py: a loop's adds into one
element kept in a local): every value is the scalar code's to the bit.

Each program runs in both modes against an analytic gradient (f64) or a numpy loop; in fast
mode it also runs with TINYAD_CPU_LANES=0 and TINYAD_CPU_ACCUMULATORS=0, and values and
gradients must be equal bit for bit.
"""
import numpy as np
import pytest

import tinyad as ti

EPS = 1e-3


def _gravity(n, dtype):
    """N-body potential U = sum_ij -1/sqrt(|xi - xj|^2 + eps) and its Tape gradient."""
    x = ti.Vector.field(2, dtype=dtype, shape=n, needs_grad=True)
    U = ti.field(dtype=dtype, shape=(), needs_grad=True)

    @ti.kernel
    def energy():
        for i, j in ti.ndrange(n, n):
            r = x[i] - x[j]
            U[None] += -1 / ti.sqrt(r.dot(r) + EPS)

    np_type = np.float32 if dtype == ti.f32 else np.float64
    x.from_numpy(np.random.default_rng(n).random((n, 2)).astype(np_type))
    with ti.ad.Tape(loss=U):
        energy()
    return energy, U[None], x.grad.to_numpy(), x.to_numpy().astype(np.float64)


def _analytic(x):
    r = x[:, None, :] - x[None, :, :]
    s = np.sum(r * r, axis=-1) + EPS
    return np.sum(-1 / np.sqrt(s)), 2 * np.sum(r / s[..., None] ** 1.5, axis=1)


def _run(mode, fn, lanes, monkeypatch, dtype=ti.f64):
    monkeypatch.setenv("TINYAD_CPU_LANES", "1" if lanes else "0")
    monkeypatch.setenv("TINYAD_CPU_ACCUMULATORS", "1" if lanes else "0")
    ti.init(mode=mode, default_fp=dtype)
    return fn()


@pytest.mark.parametrize("n", [8, 10, 6, 3])   # 8 lanes; and a remainder; 4 and 2; too short
@pytest.mark.parametrize("dtype", [ti.f32, ti.f64])
def test_gravity_on_lanes_is_bitwise_the_scalar_code(mode, n, dtype, monkeypatch):
    energy, u, grad, x = _run(mode, lambda: _gravity(n, dtype), True, monkeypatch, dtype)
    want_u, want_grad = _analytic(x)
    tol = 1e-4 if dtype == ti.f32 else 1e-10
    assert u == pytest.approx(want_u, rel=tol)
    np.testing.assert_allclose(grad, want_grad, rtol=tol * 10, atol=tol)
    if mode != "fast":
        return
    programs = energy._traced_for_inspection()._programs
    sources = {variant: p.source for variant, p in programs.items()}
    assert set(sources) >= {"primal", "adjoint"}
    for variant, source in sources.items():
        assert ("vsqrt(" in source) == (n >= 4), (variant, source)
        assert "_home" in source, (variant, source)      # U[None], x.grad[i]: accumulated
    scalar, u0, grad0, _ = _run(mode, lambda: _gravity(n, dtype), False, monkeypatch, dtype)
    assert "vsqrt(" not in scalar._traced_for_inspection()._programs["adjoint"].source
    assert "_home" not in scalar._traced_for_inspection()._programs["adjoint"].source
    assert np.array_equal(np.array(u), np.array(u0))
    assert np.array_equal(grad.view(np.uint8), grad0.view(np.uint8))


def test_no_lanes_where_an_iteration_reads_what_the_loop_writes(mode, monkeypatch):
    """y[j] is read in the prefix and written by the kernel: four prefixes before the first
    iteration's store would read stale values, so the loop stays scalar (and right)."""
    def run():
        n = 8
        y = ti.field(ti.f64, shape=n + 1)
        y.from_numpy(np.arange(1.0, n + 2.0))

        @ti.kernel
        def chain():
            for _ in range(1):
                for j in range(n):
                    w = 1.0 / ti.sqrt(y[j])
                    y[j + 1] += w
        chain()
        return chain, y.to_numpy()

    chain, got = _run(mode, run, True, monkeypatch)
    want = np.arange(1.0, 10.0)
    for j in range(8):
        want[j + 1] += 1 / np.sqrt(want[j])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    if mode == "fast":
        assert "vsqrt(" not in chain._traced_for_inspection()._programs["primal"].source


def test_no_lanes_for_a_value_carried_between_iterations(mode, monkeypatch):
    """`a` is read before it is set in the iteration (the last iteration's value)."""
    def run():
        n = 8
        y, out = ti.field(ti.f64, shape=n), ti.field(ti.f64, shape=n)
        y.from_numpy(np.arange(1.0, n + 1.0))

        @ti.kernel
        def carried():
            for _ in range(1):
                a = 1.0
                for j in range(n):
                    b = y[j] / a
                    a = ti.sqrt(b + 1.0)
                    out[j] = a
        carried()
        return carried, out.to_numpy()

    carried, got = _run(mode, run, True, monkeypatch)
    a, want = 1.0, []
    for j in range(8):
        a = np.sqrt((j + 1.0) / a + 1.0)
        want.append(a)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    if mode == "fast":
        assert "vsqrt(" not in carried._traced_for_inspection()._programs["primal"].source


def test_no_accumulator_for_an_element_the_loop_reads(mode, monkeypatch):
    """s[i] is read in the loop that adds into it: each add must see the previous ones."""
    def run():
        n = 8
        s, y = ti.field(ti.f64, shape=n), ti.field(ti.f64, shape=n)
        y.from_numpy(np.arange(1.0, n + 1.0))

        @ti.kernel
        def running():
            for i in range(n):
                for j in range(n):
                    s[i] += y[j] * 0.5 + s[i] * 0.25
        running()
        return running, s.to_numpy()

    running, got = _run(mode, run, True, monkeypatch)
    want = np.zeros(8)
    for i in range(8):
        for j in range(8):
            want[i] += (j + 1.0) * 0.5 + want[i] * 0.25
    np.testing.assert_allclose(got, want, rtol=1e-12)
    if mode == "fast":
        assert "_home" not in running._traced_for_inspection()._programs["primal"].source


def test_accumulated_adds_meet_where_an_index_equals_the_home(mode, monkeypatch):
    """h[i] += 1/y[j] and h[j] -= 1/y[i]: at j == i both go into h[i], in order; values bit
    for bit as without accumulators (f32 sums round in order)."""
    def run():
        n = 12
        h, y = ti.field(ti.f32, shape=n), ti.field(ti.f32, shape=n)
        y.from_numpy(np.linspace(1.0, 3.0, n).astype(np.float32))

        @ti.kernel
        def scatter():
            for i in range(n):
                for j in range(n):
                    h[i] += 1.0 / y[j]
                    h[j] -= 1.0 / ti.sqrt(y[i])
        scatter()
        return scatter, h.to_numpy()

    kernel, got = _run(mode, run, True, monkeypatch, ti.f32)
    y = np.linspace(1.0, 3.0, 12).astype(np.float32)
    want = np.zeros(12, np.float32)
    for i in range(12):
        for j in range(12):
            want[i] += np.float32(1.0) / y[j]
            want[j] -= np.float32(1.0) / np.sqrt(y[i])
    np.testing.assert_allclose(got, want, rtol=1e-5)
    if mode == "fast":
        assert "_home" in kernel._traced_for_inspection()._programs["primal"].source
        _, scalar = _run(mode, run, False, monkeypatch, ti.f32)
        assert np.array_equal(got.view(np.uint32), scalar.view(np.uint32))


def test_no_rewrite_of_a_loop_that_breaks(mode, monkeypatch):
    """A break must leave the whole loop: neither a group of lanes nor an accumulator's
    write-back may survive it."""
    def run():
        n = 32                      # the break comes in the second of four groups of 8
        y, total = ti.field(ti.f64, shape=n), ti.field(ti.f64, shape=())
        y.from_numpy(_dip())

        @ti.kernel
        def until_small():
            for _ in range(1):
                for j in range(n):
                    w = 1.0 / ti.sqrt(y[j])
                    if w > 1.2:
                        break
                    total[None] += w
        until_small()
        return until_small, total[None]

    kernel, got = _run(mode, run, True, monkeypatch)
    want = 0.0
    for v in _dip():
        if 1 / np.sqrt(v) > 1.2:
            break
        want += 1 / np.sqrt(v)
    assert got == pytest.approx(want, rel=1e-12)
    if mode == "fast":
        source = kernel._traced_for_inspection()._programs["primal"].source
        assert "vsqrt(" not in source and "_home" not in source


def _dip():
    """Ones but a small value at 11: 1/sqrt exceeds 1.2 there only."""
    y = np.linspace(1.0, 0.9, 32)
    y[11] = 0.1
    return y
