"""A component of a matrix field's element picked at run time, `m[i][k, l] = v` (diffmpm_bridge's
opt.py loads its target strains so, over ndrange(steps, particles, 2, 2)): the store touches
that component only, as in Taichi. It was traced as a select over every component, so each
iteration read and wrote all four: a parallel conflict reported (an error once a gradient read
the field) on a correct program, and a real data race in the compiled loop."""
import numpy as np
import pytest

import tinyad as ti


def _fields(n):
    m = ti.Matrix.field(2, 2, ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    return m, loss


def test_components_stored_by_separate_iterations(mode, capfd):
    """Four iterations per element, one component each: no report, every value stored, and
    the gradient of sum(m^2) is 2 m (analytic)."""
    n = 5
    m, loss = _fields(n)

    @ti.kernel
    def load(a: ti.types.ndarray()):
        for i, k, l in ti.ndrange(n, 2, 2):
            m[i][k, l] = a[i, k, l]

    @ti.kernel
    def total():
        for i in m:
            loss[None] += (m[i] ** 2).sum()

    a = np.random.default_rng(1).normal(size=(n, 2, 2))
    load(a)
    with ti.ad.Tape(loss):
        total()
    np.testing.assert_array_equal(m.to_numpy(), a)
    np.testing.assert_allclose(m.grad.to_numpy(), 2 * a, rtol=1e-12)
    assert "Parallel loop conflict" not in capfd.readouterr().err


def test_components_read_and_updated_by_separate_iterations(mode, capfd):
    """`m[i][k, l] += v` (a read and a store of the picked component) in separate iterations:
    no report, and each component gets its own update."""
    n = 3
    m, _ = _fields(n)

    @ti.kernel
    def bump():
        for i, k, l in ti.ndrange(n, 2, 2):
            m[i][k, l] += 10.0 * k + l + i

    bump()
    want = np.array([[[10.0 * k + l + i for l in range(2)] for k in range(2)] for i in range(n)])
    np.testing.assert_array_equal(m.to_numpy(), want)
    assert "Parallel loop conflict" not in capfd.readouterr().err


def test_two_iterations_on_one_picked_component_still_race(mode):
    """The bad twin: iterations k = 0 and 1 both store component (0, 0) of one element, and a
    gradient reads it: the conflict is reported."""
    m, loss = _fields(1)

    @ti.kernel
    def clash():
        for k in range(2):
            m[0][k * 0, 0] = 1.0 + k

    @ti.kernel
    def total():
        loss[None] += m[0][0, 0] ** 2

    clash()
    with pytest.raises(ti.ParallelConflictRuleError), ti.ad.Tape(loss):
        total()
