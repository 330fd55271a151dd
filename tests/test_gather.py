"""A stencil's shifted scatter-adds become a gather (compile/gather.py): gradients against
central finite differences in both modes where it applies, and the kernels it must leave alone
(a read or store of the added elements, a branch, a non-shift index, a box past the field's edge)
computed right all the same."""
from __future__ import annotations

import numpy as np
import pytest

import tinyad as ti
from tinyad.compile.gather import split_gathers
from tinyad.compile.nesting import nest_loops

MARK = "compile/gather.py"


def source(kernel, which="primal") -> str:
    """The generated code of a kernel's program ("" in interp mode)."""
    program = kernel._traced_for_inspection()._programs.get(which)
    return getattr(program, "source", "")


def gathered(kernel, which="primal") -> bool:
    """Does the kernel's IR qualify for the split (decided the same in both modes)?"""
    traced = kernel._traced_for_inspection()
    kernel_ir = traced.variant_ir(which)
    nested, work = nest_loops(kernel_ir)
    return len(split_gathers(nested, work)[0].body) > len(nested.body)


def central_difference(loss, x, eps=1e-6):
    x, grad = np.array(x, np.float64), np.zeros(np.shape(x))
    for index in np.ndindex(x.shape):
        for sign in (1, -1):
            shifted = x.copy()
            shifted[index] += sign * eps
            grad[index] += sign * loss(shifted) / (2 * eps)
    return grad


@pytest.mark.parametrize("n, m", [(7, 5), (12, 9)])
def test_wave_step_gradient_is_a_gather(mode, n, m):
    """The wave benchmark's step on a non-square grid: the adjoint scatters into p.grad[t] at
    i +- 1, j +- 1 and reads/zeroes p.grad[t + 1] (a disjoint slice): split, and right up to the
    border of the grid (the box is the whole slice)."""
    steps = 3
    p = ti.field(ti.f64, shape=(steps + 2, n, m), needs_grad=True)
    init = ti.field(ti.f64, shape=(n, m), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def start():
        for i, j in ti.ndrange((1, n - 1), (1, m - 1)):
            p[0, i, j] = init[i, j]
            p[1, i, j] = init[i, j]

    @ti.kernel
    def step(t: ti.i32):
        for i, j in ti.ndrange((1, n - 1), (1, m - 1)):
            lap = p[t, i + 1, j] + p[t, i - 1, j] + p[t, i, j + 1] + p[t, i, j - 1] - 4 * p[t, i, j]
            p[t + 1, i, j] = 2 * p[t, i, j] - p[t - 1, i, j] + 0.2 * lap

    @ti.kernel
    def total():
        for i, j in ti.ndrange(n, m):
            loss[None] += ti.sin(p[steps + 1, i, j]) * (i + 2 * j)

    x0 = np.random.default_rng(5).random((n, m))

    def numpy_loss(x):
        q = np.zeros((steps + 2, n, m))
        q[0, 1:-1, 1:-1] = q[1, 1:-1, 1:-1] = x[1:-1, 1:-1]
        for t in range(1, steps + 1):
            c = q[t, 1:-1, 1:-1]
            lap = q[t, 2:, 1:-1] + q[t, :-2, 1:-1] + q[t, 1:-1, 2:] + q[t, 1:-1, :-2] - 4 * c
            q[t + 1, 1:-1, 1:-1] = 2 * c - q[t - 1, 1:-1, 1:-1] + 0.2 * lap
        i, j = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
        return np.sum(np.sin(q[steps + 1]) * (i + 2 * j))

    init.from_numpy(x0)
    with ti.ad.Tape(loss=loss):
        start()
        for t in range(1, steps + 1):
            step(t)
        total()
    np.testing.assert_allclose(init.grad.to_numpy(), central_difference(numpy_loss, x0),
                               rtol=1e-6, atol=1e-8)
    assert gathered(step, "adjoint")
    assert mode == "interp" or MARK in source(step, "adjoint")


def test_shifts_of_two_subtractions_and_a_border_box(mode):
    """Shifts by 2 in both directions, an atomic_sub among them, and adds that reach index 0 and
    the last index: the gather's box is the whole field. The gradient of a 1-d stencil."""
    n = 11
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def smooth():
        for i in range(2, n - 2):
            y[i] = x[i - 2] * x[i + 2] - 3 * x[i + 1] + ti.cos(x[i - 1]) + x[i] ** 2

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] * (i + 1)

    x0 = np.random.default_rng(6).random(n)

    def numpy_loss(v):
        out = v[:-4] * v[4:] - 3 * v[3:-1] + np.cos(v[1:-3]) + v[2:-2] ** 2
        return np.sum(out * np.arange(3, n - 1))

    x.from_numpy(x0)
    with ti.ad.Tape(loss=loss):
        smooth()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), central_difference(numpy_loss, x0),
                               rtol=1e-6, atol=1e-8)
    assert gathered(smooth, "adjoint")


def test_integer_scatter_with_different_values_and_a_reassigned_local(mode):
    """A primal scatter: three adds of two values (a local reassigned between them must not share
    a buffer), one a subtraction, plus an owned add: exact on integers."""
    n = 300
    a = ti.field(ti.i32, shape=n)
    f = ti.field(ti.i32, shape=n)

    @ti.kernel
    def scatter():
        for i in range(1, n - 1):
            v = a[i]
            f[i - 1] += v
            f[i + 1] += v
            v = v * 3 + 1
            ti.atomic_sub(f[i + 1], v)
            f[i] += 5 * a[i]

    a0 = np.arange(n, dtype=np.int32) * 7 % 13
    a.from_numpy(a0)
    scatter()
    expect = np.zeros(n, np.int64)
    expect[:-2] += a0[1:-1]
    expect[2:] += a0[1:-1]
    expect[2:] -= 3 * a0[1:-1] + 1
    expect[1:-1] += 5 * a0[1:-1]
    np.testing.assert_array_equal(f.to_numpy(), expect)
    assert gathered(scatter)
    if mode == "fast":
        assert source(scatter).count("= np.empty(") == 2        # two values, two buffers


def test_kernels_it_must_leave_alone_compute_right(mode):
    """Not split: a read of an added element (f[0] beside f[i + 1] +=), a branch around the add,
    one variable in two positions, an index `i + j`. Each still computes its value; adds that
    end at the field's last element are split (the box is in bounds)."""
    n = 40
    a = ti.field(ti.f64, shape=n)
    f = ti.field(ti.f64, shape=n)
    g = ti.field(ti.f64, shape=n)
    h = ti.field(ti.f64, shape=(n, n))
    wide = ti.field(ti.f64, shape=n + 1)

    @ti.kernel
    def reads_an_added_element():
        for i in range(1, n - 1):
            f[i + 1] += a[i]
            g[i] = f[0] * 0 + a[i]          # a load of f: the IR cannot tell it apart

    @ti.kernel
    def branch():
        for i in range(1, n - 1):
            if a[i] > 0.5:
                f[i - 1] += a[i]

    @ti.kernel
    def diagonal():
        for i, j in ti.ndrange(n - 1, n - 1):
            h[i, i + 1] += a[j]

    @ti.kernel
    def sum_of_indices():
        for i, j in ti.ndrange(n // 2, n // 2):
            h[i + j, j + 1] += a[i]

    @ti.kernel
    def to_the_last_element():
        for i in range(n):
            wide[i + 1] += a[i]

    a0 = np.random.default_rng(7).random(n)
    a.from_numpy(a0)
    for kernel in (reads_an_added_element, branch, diagonal, sum_of_indices,
                   to_the_last_element):
        kernel()
    expect_f = np.zeros(n)
    expect_f[2:] += a0[1:-1]
    expect_f[:-2] += np.where(a0[1:-1] > 0.5, a0[1:-1], 0)
    np.testing.assert_allclose(f.to_numpy(), expect_f, rtol=1e-12)
    np.testing.assert_allclose(g.to_numpy()[1:-1], a0[1:-1], rtol=1e-12)
    expect_h = np.zeros((n, n))
    expect_h[np.arange(n - 1), np.arange(1, n)] += np.sum(a0[:n - 1])
    for i in range(n // 2):
        for j in range(n // 2):
            expect_h[i + j, j + 1] += a0[i]
    np.testing.assert_allclose(h.to_numpy(), expect_h, rtol=1e-12)
    np.testing.assert_allclose(wide.to_numpy(), np.concatenate([[0], a0]), rtol=1e-12)
    for kernel in (reads_an_added_element, branch, diagonal, sum_of_indices):
        assert not gathered(kernel), kernel.__name__
    assert gathered(to_the_last_element)


def test_what_the_ir_cannot_prove_is_not_split(mode):
    """Decided from the IR alone (these kernels are not launched: each races): a store into the
    slice the adds go to, the adjoint of an update in place (its zeroing store of p.grad[0, i]
    overlaps the adds into p.grad[0, i + 1]), adds past the field's last element, a slice
    index the loop changes."""
    n = 9
    f = ti.field(ti.f64, shape=n)
    a = ti.field(ti.f64, shape=n)
    p = ti.field(ti.f64, shape=(2, n), needs_grad=True)
    q = ti.field(ti.f64, shape=(n, n))

    @ti.kernel
    def store_beside():
        for i in range(1, n - 1):
            f[i + 1] += a[i]
            f[i] = 1.0

    @ti.kernel
    def in_place():
        for i in range(n - 1):
            p[0, i] = p[0, i + 1] * 2.0

    @ti.kernel
    def past_the_edge():
        for i in range(n):
            f[i + 1] += a[i]

    @ti.kernel
    def changing_slice():
        for i in range(1, n - 1):
            k = i % 3
            q[k, i + 1] += a[i]

    for kernel in (store_beside, past_the_edge, changing_slice):
        assert not gathered(kernel), kernel.__name__
    assert not gathered(in_place, "adjoint")


def test_disjoint_slices_are_proved_apart(mode):
    """The adjoint of `p[1, i] = p[0, i + 1] * p[0, i]` reads and zeroes p.grad[1, i] and adds
    into p.grad[0, i + 1]: slices 1 and 0 differ, so it is split; its gradient against central
    differences."""
    n = 9
    p = ti.field(ti.f64, shape=(2, n), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def shift():
        for i in range(n - 1):
            p[1, i] = p[0, i + 1] * p[0, i]

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += p[1, i] ** 2

    x0 = np.random.default_rng(8).random(n)

    def numpy_loss(v):
        return np.sum((v[1:] * v[:-1]) ** 2)

    p.from_numpy(np.stack([x0, np.zeros(n)]))
    with ti.ad.Tape(loss=loss):
        shift()
        total()
    np.testing.assert_allclose(p.grad.to_numpy()[0], central_difference(numpy_loss, x0),
                               rtol=1e-6, atol=1e-8)
    assert gathered(shift, "adjoint")


def test_vector_field_and_three_dimensional_stencil(mode):
    """A vector field (a constant component index beside the shifted ones) and a 3-d nest: each
    adjoint is split, and its gradient agrees with central differences."""
    n = 6
    u = ti.Vector.field(2, ti.f64, shape=(n, n), needs_grad=True)
    c = ti.field(ti.f64, shape=(n, n, n), needs_grad=True)
    out = ti.field(ti.f64, shape=(n, n, n), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def curl_like():
        for i, j in ti.ndrange((1, n - 1), (1, n - 1)):
            loss[None] += (u[i + 1, j][1] - u[i - 1, j][1] - u[i, j + 1][0]) ** 2 \
                + u[i, j - 1][0] * u[i, j][1]

    @ti.kernel
    def blur():
        for i, j, k in ti.ndrange((1, n - 1), (1, n - 1), (1, n - 1)):
            out[i, j, k] = c[i - 1, j, k] + 2 * c[i, j + 1, k] * c[i, j, k - 1]

    @ti.kernel
    def total():
        for i, j, k in out:
            loss[None] += ti.sin(out[i, j, k]) * (i + j + 2 * k)

    u0 = np.random.default_rng(9).random((n, n, 2))
    c0 = np.random.default_rng(10).random((n, n, n))

    def numpy_loss_u(v):
        a, b = v[..., 0], v[..., 1]
        return np.sum((b[2:, 1:-1] - b[:-2, 1:-1] - a[1:-1, 2:]) ** 2
                      + a[1:-1, :-2] * b[1:-1, 1:-1])

    def numpy_loss_c(x):
        o = np.zeros((n, n, n))
        o[1:-1, 1:-1, 1:-1] = x[:-2, 1:-1, 1:-1] + 2 * x[1:-1, 2:, 1:-1] * x[1:-1, 1:-1, :-2]
        i, j, k = np.meshgrid(*(np.arange(n),) * 3, indexing="ij")
        return np.sum(np.sin(o) * (i + j + 2 * k))

    u.from_numpy(u0)
    c.from_numpy(c0)
    with ti.ad.Tape(loss=loss):
        curl_like()
        blur()
        total()
    np.testing.assert_allclose(u.grad.to_numpy(), central_difference(numpy_loss_u, u0),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(c.grad.to_numpy(), central_difference(numpy_loss_c, c0),
                               rtol=1e-6, atol=1e-8)
    assert gathered(curl_like, "adjoint") and gathered(blur, "adjoint")
