"""A bad index is an error at the user's line in both modes, and never memory outside the field.

Fast mode checks, at compiled speed, the accesses whose bounds no launch check settles: an
index read from a field, computed from a float (0/0 cast to i32 is INT_MIN), or under a branch
(core/reached.py unproven_indices). Without that, fast mode read another array's memory,
wrapped -1 to the end of the field, or ended the process with a segmentation fault where interp
mode reported the index.
"""
import numpy as np
import pytest

import tinyad as ti


@pytest.mark.parametrize("n", [8, 20000])      # a serial kernel, and one on the thread pool
def test_an_index_read_from_a_field(mode, n):
    x = ti.field(ti.f64, n)
    idx = ti.field(ti.i32, n)
    out = ti.field(ti.f64, n)

    @ti.kernel
    def gather():
        for i in range(n):
            out[i] = x[idx[i]]

    x.from_numpy(np.arange(n, dtype=np.float64))
    idx.from_numpy(np.arange(n)[::-1].astype(np.int32))
    gather()
    np.testing.assert_array_equal(out.to_numpy(), np.arange(n)[::-1])   # in bounds: as before
    idx[n - 1] = -1          # fast mode wrapped it to x[n - 1]
    with pytest.raises(ti.TinyadIndexError, match=r"index \(-1,\) is out of bounds for field "
                                                  r"x of shape") as error:
        gather()
    assert "out[i] = x[idx[i]]" in str(error.value)


def test_an_index_computed_from_nan(mode):
    """0/0 cast to i32 is INT_MIN: fast mode ended the process (exit 139)."""
    n = 4
    x = ti.field(ti.f32, n)
    out = ti.field(ti.f32, n)

    @ti.kernel
    def lookup():
        for i in range(n):
            k = ti.cast(x[i] / x[i], ti.i32)
            out[i] = x[k]

    with pytest.raises(ti.TinyadIndexError, match=r"index \(-2147483648,\)"):
        lookup()


def test_an_index_under_a_branch(mode):
    n = 6
    x = ti.field(ti.f64, n)
    out = ti.field(ti.f64, n)

    @ti.kernel
    def previous(offset: ti.i32):
        for i in range(n):
            if i % 2 == 1:
                out[i] = x[i - offset]

    x.from_numpy(np.arange(n, dtype=np.float64) * 10)
    previous(1)
    assert out.to_numpy().tolist() == [0, 0, 0, 20, 0, 40]
    with pytest.raises(ti.TinyadIndexError, match=r"index \(-1,\)"):
        previous(2)


def test_a_scatter_through_an_index_field_differentiates_as_before(mode):
    """The checks change no value: d/dx of sum_i w_i x[idx_i]^2 is 2 x_j times the weights
    gathered at j."""
    n = 5
    x = ti.field(ti.f64, n, needs_grad=True)
    idx = ti.field(ti.i32, n)
    loss = ti.field(ti.f64, (), needs_grad=True)

    @ti.kernel
    def energy():
        for i in range(n):
            loss[None] += (i + 1) * x[idx[i]] ** 2

    values, targets = np.array([0.5, -1.0, 2.0, 0.25, 1.5]), np.array([4, 4, 0, 2, 1])
    x.from_numpy(values)
    idx.from_numpy(targets.astype(np.int32))
    with ti.ad.Tape(loss):
        energy()
    expected = np.zeros(n)
    for i, j in enumerate(targets):
        expected[j] += (i + 1) * 2 * values[j]
    np.testing.assert_allclose(x.grad.to_numpy(), expected)


def test_a_scatter_into_per_thread_copies(mode):
    """mpm's particle-to-grid pattern: at this size fast mode adds into per-thread copies of
    the grid (and then sums them), a path of its own that now checks its index too."""
    n = 20000
    x = ti.field(ti.f32, n)
    grid = ti.field(ti.f32, 64)

    @ti.kernel
    def scatter():
        for i in range(n):
            grid[ti.cast(x[i] * 64, ti.i32)] += 1.0

    x.from_numpy(np.linspace(0, 0.99, n).astype(np.float32))
    scatter()
    assert grid.to_numpy().sum() == n
    x[5] = -0.5
    with pytest.raises(ti.TinyadIndexError, match=r"index \(-32,\) is out of bounds for field "
                                                  r"grid"):
        scatter()
