"""Branches under autodiff, following Taichi's test_ad_if.py, test_ad_if_fwd.py and
test_global_store_grad.py: `if` on values and on indices, nested, a local mutated inside a
branch, branches inside parallel and inner loops, stores made on one side only; each gradient
against an analytic value or central finite differences, reverse and forward mode, both modes.
Also the one program of test_ad_if.py that tinyad refuses, and why."""
import numpy as np
import pytest

import tinyad as ti
from tests.taichi_like import assert_fwd_matches_fd, assert_tape_matches_fd


def _field(shape, values=None, dtype=ti.f64):
    f = ti.field(dtype, shape=shape, needs_grad=True, needs_dual=True)
    if values is not None:
        f.from_numpy(np.asarray(values, dtype=f.dtype.np))
    return f


@pytest.mark.parametrize("dtype", [ti.f32, ti.f64])
def test_if_on_a_value_picks_the_derivative(mode, dtype):
    """ad_if_simple, ad_if, ad_if_parallel(_f64): y = x^2 where x > 0, else -3x."""
    x = _field(6, [-1.5, -0.5, 0.25, 0.75, 1.5, -2.0], dtype)
    loss = _field((), dtype=dtype)

    @ti.kernel
    def run():
        for i in x:
            t = x[i]
            if t > 0:
                loss[None] += t * t
            else:
                loss[None] += -3 * t

    rtol = 1e-6 if dtype == ti.f32 else 1e-12
    x.grad.fill(0)
    with ti.ad.Tape(loss=loss):
        run()
    values = x.to_numpy()
    np.testing.assert_allclose(x.grad.to_numpy(), np.where(values > 0, 2 * values, -3.0),
                               rtol=rtol)
    if dtype == ti.f64:      # (f32 values are too coarse for finite differences)
        assert_tape_matches_fd(run, loss, [x])
        assert_fwd_matches_fd(run, loss, x)


def test_nested_ifs_on_indices_and_values(mode):
    """ad_if_nested: conditions on the index and on values, three levels deep."""
    x = _field(8, np.linspace(-1.0, 1.0, 8))
    loss = _field(())

    @ti.kernel
    def run():
        for i in x:
            if i % 2 == 0:
                if x[i] > 0:
                    loss[None] += ti.sin(x[i])
                else:
                    if i < 4:
                        loss[None] += x[i] * x[i] * x[i]
                    else:
                        loss[None] += 2 * x[i]
            else:
                loss[None] += ti.exp(x[i])

    assert_tape_matches_fd(run, loss, [x])
    assert_fwd_matches_fd(run, loss, x)


def test_a_local_mutated_inside_a_branch(mode):
    """ad_if_mutable, ad_if_parallel_complex(_f64): t changes in the branch, then is used;
    the branch sits in an inner loop and reads the loop's local."""
    x = _field(5, [0.2, -0.4, 0.9, -1.3, 0.6])
    loss = _field(())

    @ti.kernel
    def run():
        for i in x:
            t = x[i]
            for j in range(3):
                if t > 0:
                    t = t * t + 0.1 * j
                else:
                    t = -t * 0.5 + x[i]
            loss[None] += t

    assert_tape_matches_fd(run, loss, [x])
    assert_fwd_matches_fd(run, loss, x)


def test_a_store_on_one_side_only(mode):
    """test_global_store_grad: x[i] = y[i] for even i only: y.grad is 1 on those, 0 else."""
    n = 8
    x = ti.field(ti.f64)
    y = ti.field(ti.f64)
    ti.root.dense(ti.i, n).place(x)
    ti.root.dense(ti.i, n).place(y)
    ti.root.lazy_grad()

    @ti.kernel
    def copy_even():
        for i in range(n):
            if i % 2 == 0:
                x[i] = y[i]

    y.from_numpy(np.arange(n, dtype=np.float64))
    x.grad.fill(1)
    copy_even()
    copy_even.grad()
    np.testing.assert_array_equal(y.grad.to_numpy(), [1.0 - i % 2 for i in range(n)])
    np.testing.assert_array_equal(x.to_numpy()[::2], np.arange(0, n, 2))


def test_a_read_then_overwritten_field_is_refused(mode):
    """test_if_condition_depend_on_for_loop_index: Taichi runs it; its kernel reads pos, then
    adds to the same element, and the adjoint replays the read with the new value. Here the
    loss does not depend on F, so Taichi's gradients happen to be zero; make it depend and
    they are wrong. tinyad refuses the program (Global Data Access Rule 1)."""
    pos = ti.Vector.field(3, dtype=ti.f64)
    force = ti.Vector.field(3, dtype=ti.f64)
    bend = ti.field(dtype=ti.f64)
    loss = ti.field(dtype=ti.f64)
    ti.root.dense(ti.ij, (3, 3)).place(pos, force)
    ti.root.dense(ti.i, 1).place(bend)
    ti.root.place(loss)
    ti.root.lazy_grad()

    @ti.kernel
    def simulate(t: ti.i32):
        for i, j in pos:
            for n in range(4):
                f = ti.Vector([0.0, 0.0, 0.0])
                if n < 2:
                    f = ti.Vector([1.0, 1.0, 1.0])
                else:
                    f = bend[0] * pos[i, j]
                force[i, j] += f
            pos[i, j] += 1.0 * t

    with pytest.raises(ti.ReadThenOverwriteRuleError):
        with ti.ad.Tape(loss=loss):
            simulate(5)
