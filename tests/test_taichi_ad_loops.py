"""Loops under autodiff, following Taichi's test_ad_for.py, test_ad_for_fwd.py, test_loop_grad.py
and test_ad_offload.py: inner serial loops that carry locals (sums, products, atomics on locals,
tuple-assigned recurrences, integer counters used as indices), nests and stacked inner loops,
loops whose bounds come from fields, several loops in one kernel. Each gradient is checked
against an analytic value or central finite differences (f64), reverse and forward mode, in
both modes. (The 10⁷-iteration loops are tests/test_serial_lanes.py's.)"""
import numpy as np

import tinyad as ti
from tests.taichi_like import assert_fwd_matches_fd, assert_tape_matches_fd, fresh_loss
from tinyad.core import ir

N = 4


def _field(shape=N, values=None, dtype=ti.f64):
    f = ti.field(dtype, shape=shape, needs_grad=True, needs_dual=True)
    if values is not None:
        f.from_numpy(np.asarray(values, dtype=f.dtype.np))
    return f


def test_locals_carried_by_inner_loops_sum_product_and_atomic(mode):
    """ad_sum, ad_power, ad_sum_local_atomic: trip counts read from a field."""
    a = _field(values=[0.5, 1.2, -0.7, 2.0])
    counts = ti.field(ti.i32, shape=N)
    counts.from_numpy(np.array([1, 3, 4, 2], dtype=np.int32))
    total, power, atomic = (_field(shape=()) for _ in range(3))

    @ti.kernel
    def run():
        for i in range(N):
            s = 0.0
            p = 1.0
            t = 0.0
            for _ in range(counts[i]):
                s += a[i] * a[i]
                p = p * a[i]
                ti.atomic_add(t, 3.0 * a[i])
            total[None] += s
            power[None] += p
            atomic[None] += t

    (grad,) = assert_tape_matches_fd(run, total, [a])
    values, c = a.to_numpy(), counts.to_numpy()
    np.testing.assert_allclose(grad, 2 * c * values, rtol=1e-12)
    (grad,) = assert_tape_matches_fd(run, power, [a])
    np.testing.assert_allclose(grad, c * values ** (c - 1), rtol=1e-12)
    (grad,) = assert_tape_matches_fd(run, atomic, [a])
    np.testing.assert_allclose(grad, 3.0 * c, rtol=1e-12)
    assert_fwd_matches_fd(run, power, a)


def test_fibonacci_recurrence_by_tuple_assignment(mode):
    """ad_fibonacci: p, q = q, p + q; d q_n / d p_0 and d q_n / d q_0 are Fibonacci numbers."""
    p0 = _field(values=[1.0, 0.5, 2.0, -1.0])
    q0 = _field(values=[1.0, 1.5, 0.0, 3.0])
    steps = ti.field(ti.i32, shape=N)
    steps.from_numpy(np.array([0, 1, 5, 7], dtype=np.int32))
    loss = _field(shape=())

    @ti.kernel
    def run():
        for i in range(N):
            p = p0[i]
            q = q0[i]
            for _ in range(steps[i]):
                p, q = q, p + q
            loss[None] += q

    def fib(n):
        a, b = 0, 1
        for _ in range(n):
            a, b = b, a + b
        return a

    gp, gq = assert_tape_matches_fd(run, loss, [p0, q0])
    n = steps.to_numpy()
    np.testing.assert_allclose(gp, [fib(k) for k in n])
    np.testing.assert_allclose(gq, [fib(k + 1) for k in n])
    assert_fwd_matches_fd(run, loss, q0)


def test_an_integer_counter_chooses_the_elements(mode):
    """ad_fibonacci_index, integer_stack: an integer recurrence in a loop picks the elements read
    and written; the gradient lands on exactly those."""
    a = _field(shape=16, values=np.linspace(0.1, 1.6, 16))
    b = _field(shape=16)
    loss = _field(shape=())

    @ti.kernel
    def run():
        for i in range(2):
            p = 0
            q = 1
            for _ in range(5):
                p, q = q, p + q           # q: 1, 2, 3, 5, 8
                b[q] += a[q] * a[q]
        for k in range(16):
            loss[None] += b[k]

    b.fill(0)
    (grad,) = assert_tape_matches_fd(lambda: (b.fill(0), run()), loss, [a])
    expected = np.zeros(16)
    for q in (1, 2, 3, 5, 8):
        expected[q] = 2 * 2 * a.to_numpy()[q]
    np.testing.assert_allclose(grad, expected, rtol=1e-12)


def test_nested_and_stacked_inner_loops_with_mutated_locals(mode):
    """double_for_loops(_more_nests), complex_body, mixed_inner_loops, (stacked_)inner_loops_
    local_variable, multiple_ib(_deeper), ib_global_load: locals mutated at several depths and
    read back by later loops, global loads inside inner loops."""
    x = _field(values=[0.3, -0.4, 0.8, 0.1])
    w = _field(shape=3, values=[0.7, -1.1, 0.4])
    loss = _field(shape=())

    @ti.kernel
    def run():
        for i in range(N):
            s = x[i]
            t = 0.0
            for j in range(3):
                s = ti.sin(s) + w[j] * x[i]      # mutated, read by the next iteration
                for k in range(2):
                    t += s * w[k] + ti.cos(t * 0.1)
            u = 1.0
            for j in range(2):                   # a second, stacked inner loop
                u = u * (1.0 + 0.5 * s) + t * x[(i + j) % N]
            loss[None] += u

    assert_tape_matches_fd(run, loss, [x, w], rtol=1e-5)
    assert_fwd_matches_fd(run, loss, w)

    # kernel.grad() without a Tape gives the same gradient as the Tape (the *_kernel_grad twins)
    x.grad.fill(0)
    w.grad.fill(0)
    loss.fill(0)
    run()
    loss.grad.fill(1)
    run.grad()
    manual = [x.grad.to_numpy().copy(), w.grad.to_numpy().copy()]
    got = assert_tape_matches_fd(run, loss, [x, w], rtol=1e-5)
    for m, g in zip(manual, got):
        np.testing.assert_allclose(m, g, rtol=1e-12)


def test_multiple_inner_blocks_add_up(mode):
    """multiple_ib, multiple_ib_multiple_outermost(_mixed): y = 2 * 2 * 3 * x, in loops."""
    x = _field(shape=(), values=1.0)
    y = _field(shape=())

    @ti.kernel
    def run():
        for _ in range(2):
            for _ in range(3):
                y[None] += x[None]
            for _ in range(3):
                y[None] += x[None]
        for _ in range(1):
            y[None] += 0.5 * x[None] * x[None]

    (grad,) = assert_tape_matches_fd(run, y, [x])
    assert fresh_loss(run, y) == 12.5 and grad[()] == 13.0
    assert_fwd_matches_fd(run, y, x)


def test_the_loop_index_in_the_body(mode):
    """for_loop_index: the index of a serial loop as a value."""
    x = _field(shape=(), values=0.5)
    loss = _field(shape=())

    @ti.kernel
    def run():
        for _ in range(1):
            for j in range(5):
                loss[None] += x[None] * j + ti.sqrt(j + x[None])

    (grad,) = assert_tape_matches_fd(run, loss, [x])
    expected = sum(j + 0.5 / np.sqrt(j + 0.5) for j in range(5))
    np.testing.assert_allclose(grad[()], expected, rtol=1e-12)


def test_a_serial_loop_overwriting_its_field_keeps_the_first_gradient(mode):
    """test_loop_grad: x[k, i + 1] = x[k, i] * 2 in a serial loop. The stores' adjoints reset
    the gradient of what they overwrote, so only x.grad[k, 0] = 2^(m-1) survives."""
    n, m = 3, 5
    x = ti.field(ti.f64)
    ti.root.dense(ti.ij, (n, m)).place(x)
    ti.root.lazy_grad()

    @ti.kernel
    def double_along():
        for k in range(n):
            for i in range(m - 1):
                x[k, i + 1] = x[k, i] * 2

    for k in range(n):
        x[k, 0] = k
    double_along()
    for k in range(n):
        x.grad[k, m - 1] = 1
    double_along.grad()
    expected = np.zeros((n, m))
    expected[:, 0] = 2 ** (m - 1)
    np.testing.assert_array_equal(x.grad.to_numpy(), expected)
    np.testing.assert_array_equal(x.to_numpy()[:, m - 1], np.arange(n) * 2 ** (m - 1))


def test_two_top_level_loops_in_one_kernel_run_in_order(mode):
    """test_ad_offload: the second loop reads what the first wrote (Taichi offloads each)."""
    x = _field(shape=8, values=np.linspace(-1, 1, 8))
    y = _field(shape=8)
    z = _field(shape=())

    @ti.kernel
    def run():
        for i in x:
            y[i] = x[i] * x[i]
        for i in x:
            z[None] += y[i] * 3.0

    (grad,) = assert_tape_matches_fd(run, z, [x])
    np.testing.assert_allclose(grad, 6.0 * x.to_numpy(), rtol=1e-12)


def test_an_inner_loop_of_its_own_locals_is_differentiated_per_iteration(mode):
    """DiffTaichi's wave: an inner serial loop whose body only uses locals it assigns itself
    (a bounds-guarded stencil through a ti.func). Its adjoint replays each iteration just
    before that iteration's adjoint, with no stack: saving 20 locals at each of 256 inner steps
    made the adjoint 50x its forward. A loop that carries a local still saves it."""
    n = 6
    p = _field(shape=(3, n, n), values=np.random.default_rng(1).random((3, n, n)))
    loss = _field(shape=())

    @ti.func
    def get_p(t, i, j):
        return p[t, i, j] if 0 <= i < n and 0 <= j < n else 0.0

    @ti.kernel
    def step():
        for i in range(n):
            for j in range(n):
                lap = get_p(0, i + 1, j) + get_p(0, i, j - 1) - 2 * get_p(0, i, j)
                value = ti.sin(lap) * p[1, i, j]
                p[2, i, j] = value

    @ti.kernel
    def total():
        for i, j in ti.ndrange(n, n):
            loss[None] += p[2, i, j] ** 2

    def run():
        step()
        total()

    assert_tape_matches_fd(run, loss, [p])
    assert not [s for s in ir.walk_stmts(step.grad.ir.body) if isinstance(s, ir.Save)]

    @ti.kernel
    def carried():
        for i in range(n):
            v = p[0, i, 0]
            for k in range(3):
                v = ti.sin(v) + p[1, i, k]
            loss[None] += v

    assert [s for s in ir.walk_stmts(carried.grad.ir.body) if isinstance(s, ir.Save)]
    assert_tape_matches_fd(carried, loss, [p])


def test_an_inner_loop_under_a_branch_accumulates_into_a_local(mode):
    """DFSPH_difftaichi's trial 15: y_i = max(2 x_i sum_j x_j + x_i, 0) for i > 2. The loss
    y_3 + y_4 has d/dx_j = 2 (x_3 + x_4) = 14 for j < 3 and 2 sum_j x_j + 14 + 1 = 35 for
    j = 3, 4. Taichi 1.7.4 gives 0, 0, 0, 9, 23, with validation=True and debug=True."""
    x = _field(shape=5, values=np.arange(5.0))
    y = _field(shape=5)
    loss = _field(shape=())

    @ti.kernel
    def calc():
        for i in range(5):
            if i > 5 / 2:
                s = 0.0
                for j in range(5):
                    s += x[j] * x[i]
                y[i] = ti.max(s * 2 + x[i], 0)

    @ti.kernel
    def total():
        for i in range(5):
            loss[None] += y[i]

    with ti.ad.Tape(loss=loss):
        calc()
        total()
    assert y.to_numpy().tolist() == [0, 0, 0, 63, 84]
    assert x.grad.to_numpy().tolist() == [14, 14, 14, 35, 35]
