"""An access a launch certainly makes outside its field (tinyad/check/reached.py): checked fast
mode raises interp mode's bounds error before the launch, found from the IR once per argument
values, where ti.init(debug=True) would check every element. An access that only may be out
of bounds (behind a branch, a `continue`, in a loop that may break, or with indices whose ends
are not reached) is not reported: each of those runs here, in both modes, to the same values."""
import numpy as np
import pytest

import tinyad as ti
from tinyad.check.regions import regions_of


def test_a_time_step_one_past_the_end_is_refused_before_the_launch(mode):
    steps, n = 4, 8
    x = ti.field(ti.f32, shape=(steps, n))
    y = ti.field(ti.f32, shape=(steps, n))
    x.from_numpy(np.ones((steps, n), np.float32))

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            y[t, i] = x[t + 1, i] * 2     # <- the read past the end at t = steps - 1

    for t in range(steps - 1):
        step(t)
    with pytest.raises(ti.TinyadIndexError) as info:
        step(steps - 1)
    text = str(info.value)
    assert "y[t, i] = x[t + 1, i] * 2     # <- the read past the end" in text
    if mode == "fast":       # (without debug=True: from the IR, naming the argument)
        assert "index 4 in dimension 0 is out of bounds for field x of shape (4, 8)" in text
        assert "this launch (t=3) reaches it" in text
    else:
        assert "index (4, 0) is out of bounds for field x of shape (4, 8)" in text
    assert (y.to_numpy()[steps - 1] == 0).all()      # the launch never ran


def test_an_ndrange_past_a_fields_last_dimension_is_refused(mode):
    # Taichi's diff_sph: a layer writes output[model, t, k, i] for i in range(n_hidden), where
    # output has n_output < n_hidden columns (Taichi overwrites the next field without a word)
    hidden, out = 5, 3
    output = ti.field(ti.f32, shape=(2, 4, out))

    @ti.kernel
    def layer(t: ti.i32):
        for model, i in ti.ndrange(2, (1, hidden)):
            output[model, t, i - 1] = 1.0

    with pytest.raises(ti.TinyadIndexError, match=r"field output of shape \(2, 4, 3\)"):
        layer(0)


def test_the_plan_holds_the_certain_index_and_which_access_reaches_it():
    ti.init(mode="fast")
    n = 6
    a = ti.Vector.field(2, ti.f32, shape=(3, n))
    b = ti.field(ti.f32, shape=n, offset=(-1,))

    @ti.kernel
    def k(t: ti.i32, s: ti.i32):
        for j in range(1, n - 1):
            a[t, 2 * j - 4] = [0.0, 1.0]       # j = 1: index -2
        b[s // 2 - 1] = 1.0                    # a top-level store: its one index

    plans = regions_of(k._traced_for_inspection())
    assert plans.plan((0, 2)).out_of_bounds[1:] == (1, -2)
    with pytest.raises(ti.TinyadIndexError, match=r"index -2 in dimension 1 .* field a "
                                                  r"of shape \(3, 6\) with \(2,\) elements"):
        k(0, 2)

    @ti.kernel
    def only_b(s: ti.i32):
        b[s // 2 - 1] = 1.0

    plans = regions_of(only_b._traced_for_inspection())
    assert plans.plan((0,)).out_of_bounds is None    # b[-1]: b's indices are -1 to 4
    site, dim, index = plans.plan((12,)).out_of_bounds
    assert (site.field, dim, index) == (b, 0, 6)     # b[5]: its storage index 6
    with pytest.raises(ti.TinyadIndexError, match=r"index 6 in dimension 0 .* field b of "
                                                  r"shape \(6,\) and offset \(-1,\)"):
        only_b(14)
    only_b(0)
    assert b[-1] == 1.0


def test_debug_mode_checks_each_element_instead():
    ti.init(mode="fast", debug=True)
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def shift():
        for i in x:
            x[i] = x[i + 1]

    with pytest.raises(ti.TinyadIndexError, match=r"index \(4,\) is out of bounds"):
        shift()


def test_an_assert_is_no_access_without_debug():
    ti.init(mode="fast")     # (fast mode runs asserts only with debug=True, as Taichi does)
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def asserting():
        for i in x:
            assert x[i + 1] >= 0, "x[4] would be out of bounds"

    asserting()
    assert regions_of(asserting._traced_for_inspection()).plan(()).out_of_bounds is None


def test_accesses_that_only_may_leave_the_field_run(mode):
    n = 8
    x = ti.field(ti.f64, shape=n)
    y = ti.field(ti.f64, shape=n)
    x.from_numpy(np.arange(n, dtype=np.float64))

    @ti.kernel
    def guarded():
        for i in range(n):
            if i + 1 < n:
                y[i] = x[i + 1]

    @ti.kernel
    def ternary():
        for i in range(n):
            y[i] += x[i - 1] if i > 0 else 0.0

    @ti.kernel
    def skipping():
        for i in range(n):
            if i == n - 1:
                continue
            y[i] += x[i + 1]

    @ti.kernel
    def breaking():
        ti.loop_config(serialize=True)      # (a serial loop may break)
        for i in range(n):
            if i == n - 1:
                break
            y[i] += x[i + 1]

    @ti.kernel
    def triangle():
        for i in range(1, n):
            for j in range(i):
                y[i] += x[i - j - 1]      # (j < i: the interval's ends are not reached)

    @ti.kernel
    def same_variable_twice():
        for i in range(n):
            y[i] += x[i + n - i - 1 - i]       # n - 1 - i: in bounds, though not exact

    @ti.kernel
    def waiting():
        for i in range(n):
            k = i
            while k >= n - 1:
                k -= 1
            y[i] += x[k + 1]

    @ti.kernel
    def pairs():
        for i, j in ti.ndrange((1, n), 2):
            y[i - 1] += x[i] * (j + 1) / 3      # (each i twice: j = 0, 1)

    for kernel in (guarded, ternary, skipping, breaking, triangle, same_variable_twice,
                   waiting, pairs):
        kernel()
    expected = np.zeros(n)
    values = np.arange(n, dtype=np.float64)
    expected[:-1] += values[1:]                              # guarded
    expected[1:] += values[:-1]                              # ternary
    expected[:-1] += values[1:] * 2                          # skipping, breaking
    expected += [values[:i].sum() for i in range(n)]         # triangle
    expected += values[::-1]                                 # same_variable_twice
    expected += [values[min(i, n - 2) + 1] for i in range(n)]     # waiting
    expected[:-1] += values[1:]                              # pairs
    np.testing.assert_allclose(y.to_numpy(), expected)


def test_a_forward_mode_launch_is_checked_too(mode):
    n = 4
    x = ti.field(ti.f64, shape=n, needs_dual=True)
    y = ti.field(ti.f64, shape=(), needs_dual=True)

    @ti.kernel
    def total(upto: ti.i32):
        for i in range(upto):
            y[None] += x[i + 1] ** 2

    with ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0, 0.0, 0.0]):
        total(n - 1)
    with pytest.raises(ti.TinyadIndexError, match=r"field x of shape \(4,\)"), \
            ti.ad.FwdMode(loss=y, param=x, seed=[1.0, 0.0, 0.0, 0.0]):
        total(n)


def test_indices_out_of_axis_letter_order_leave_the_field(mode):
    # DiffTaichi's rigid_body_toi places x under dense(ti.l, steps).dense(ti.i, n) and indexes
    # it x[t, i]: its indices go in axis-letter order, i's first, so x[t, 0] at t >= 1 is out
    # of bounds (fast mode wrote past the array before; interp mode stopped)
    steps, n = 8, 1
    x = ti.field(ti.f32)
    ti.root.dense(ti.l, steps).dense(ti.i, n).place(x)
    assert x.shape == (n, steps)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            x[t, i] = 1.0

    step(0)
    with pytest.raises(ti.TinyadIndexError, match=r"field x of shape \(1, 8\)"):
        step(1)
    assert x.to_numpy().sum() == 1.0


def test_a_grad_of_a_launch_that_never_ran_is_refused_too(mode):
    # Taichi issue 8119: a manual sweep `for i in range(max_t - 1, -1, -1): compute.grad(i)`
    # one step too many; compute(3) never ran (it would write z[4]), and its adjoint's z.grad[4]
    # lies past z.grad (Taichi writes there without a word)
    max_t = 4
    theta = ti.field(ti.f64, shape=(), needs_grad=True)
    z = ti.field(ti.f64, shape=max_t, needs_grad=True)

    @ti.kernel
    def compute(t: ti.i32):
        z[t + 1] = z[t] + theta[None] * 2

    for t in range(max_t - 1):
        compute(t)
    z.grad[max_t - 1] = 1.0
    with pytest.raises(ti.TinyadIndexError, match=r"field z.grad of shape \(4,\)") as info:
        compute.grad(max_t - 1)
    if mode == "fast":
        assert "compute.grad(t=3) reaches it" in str(info.value)
    for t in reversed(range(max_t - 1)):
        compute.grad(t)
    assert theta.grad[None] == pytest.approx(2 * (max_t - 1))


@pytest.mark.parametrize("check", ["off", "error"])
def test_argument_values_seen_before_pass_and_new_ones_are_still_checked(mode, check):
    # Unchecked, fast mode's launcher remembers the argument tuples whose certain indices it
    # checked (compile/badindex.py LaunchBounds.seen): one that passed runs again unchecked;
    # a new one is checked, the same values in another order too
    ti.init(mode=mode, check=check)
    steps, n = 4, 3
    x = ti.field(ti.f32, shape=(steps, n))
    y = ti.field(ti.f32, shape=(steps, n))

    @ti.kernel
    def step(t: ti.i32):
        for i in range(n):
            y[t, i] = x[t + 1, i] + 1

    @ti.kernel
    def swapped(t: ti.i32, j: ti.i32):
        for i in range(1):
            y[j, t] = 1.0

    for _ in range(2):
        for t in range(steps - 1):
            step(t)
    with pytest.raises(ti.TinyadIndexError, match="x"):
        step(steps - 1)
    swapped(2, 3)                       # y[3, 2]: inside
    with pytest.raises(ti.TinyadIndexError, match="y"):
        swapped(3, 2)                   # y[2, 3]: past y's last column
