"""Which gradients a kernel leaves all zero, proven from its IR (tinyad/check/zeroing.py): the
rule checks then take such a kernel for a clear, as a fill(0), before it runs. A kernel the
proof cannot settle is judged by the values it leaves (tests/test_rules_sweeps.py)."""
import numpy as np
import pytest

import tinyad as ti
from tinyad.check.zeroing import zeroed_gradients


def zeroed(kernel) -> list:
    kernel()
    return [f.name for f in zeroed_gradients(kernel.ir)]


def test_clear_grid_and_its_near_misses(mode):
    grid_v = ti.Vector.field(2, ti.f64, shape=(8, 8), needs_grad=True)
    grid_m = ti.field(ti.f64, shape=(8, 8), needs_grad=True)
    s = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def clear_grid():                  # DiffTaichi's: a struct-for, flattened to I // 8, I % 8
        for i, j in grid_m:
            grid_v[i, j] = [0, 0]
            grid_m[i, j] = 0
            grid_v.grad[i, j] = [0, 0]
            grid_m.grad[i, j] = 0

    @ti.kernel
    def clear_scalar():
        s.grad[None] = 0.0

    @ti.kernel
    def half_the_rows():
        for i, j in ti.ndrange(4, 8):
            grid_m.grad[i, j] = 0

    @ti.kernel
    def one_component():
        for i, j in grid_m:
            grid_v.grad[i, j][0] = 0

    @ti.kernel
    def skipping_one():
        for i, j in grid_m:
            if i == 3:
                continue
            grid_m.grad[i, j] = 0

    @ti.kernel
    def zero_then_add():
        for i, j in grid_m:
            grid_m.grad[i, j] = 0
            grid_m.grad[i, j] += 1

    @ti.kernel
    def a_nonzero_store():
        for i, j in grid_m:
            grid_m.grad[i, j] = 0.5

    @ti.kernel
    def through_a_local():             # PlasticineLab's: zero = ti.Vector.zero(...), cast
        zero = ti.Vector.zero(ti.f32, 2)
        for i, j in grid_m:
            grid_v.grad[i, j] = zero
            grid_m.grad[i, j] = zero[0]

    @ti.kernel
    def a_local_set_twice():
        z = 0.0
        for i, j in grid_m:
            grid_m.grad[i, j] = z
            z = 1.0

    assert zeroed(clear_grid) == ["grid_v.grad", "grid_m.grad"]
    assert zeroed(clear_scalar) == ["s.grad"]
    assert zeroed(through_a_local) == ["grid_v.grad", "grid_m.grad"]
    for kernel in (half_the_rows, one_component, skipping_one, zero_then_add,
                   a_nonzero_store, a_local_set_twice):
        assert zeroed(kernel) == [], kernel


def test_a_proven_clear_keeps_no_copy_of_what_it_overwrites(mode, monkeypatch):
    """A gradient point of the grid (a sweep added to grid.grad) is dropped before clear_grid
    overwrites the grid: nothing of the grid is copied for it (fast mode copies the boxes a
    launch writes, interp the fields, before the launch), and the next sweep is clean."""
    from tinyad.check.launches import LaunchChecker
    from tinyad.check import pointcopies
    copied = []
    monkeypatch.setattr(pointcopies.PartialPoint, "save",
                        lambda self, box, current: copied.append(box))
    monkeypatch.setattr(pointcopies, "SMALL_FIELD", 0)     # (small fields are copied whole)
    before_write = LaunchChecker.before_write

    def spy(checker, fld):
        if checker.uncopied_points.get(fld):
            copied.append(fld)
        before_write(checker, fld)
    monkeypatch.setattr(LaunchChecker, "before_write", spy)
    grid = ti.field(ti.f64, shape=16, needs_grad=True)
    x = ti.field(ti.f64, shape=16, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.linspace(0.5, 2.0, 16))

    @ti.kernel
    def clear_grid():
        for i in grid:
            grid[i] = 0
            grid.grad[i] = 0

    @ti.kernel
    def scatter(factor: ti.f64):
        for i in x:
            grid[i] += factor * x[i]

    @ti.kernel
    def total():
        for i in grid:
            loss[None] += grid[i] ** 2

    for factor in (1.0, 2.0):
        clear_grid()
        scatter(factor)
        total()
        loss.grad[None] = 1.0
        x.grad.fill(0)
        total.grad()
        scatter.grad(factor)
        np.testing.assert_allclose(x.grad.to_numpy(), 2 * factor ** 2 * x.to_numpy())
    assert copied == []


def test_a_kernel_that_zeroes_part_of_a_gradient_does_not_clear_it(mode):
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.array([1.0, 1.5, 2.0, 2.5]))

    @ti.kernel
    def cube():
        for i in x:
            loss[None] += x[i] ** 3

    @ti.kernel
    def clear_most():
        for i in range(3):
            x.grad[i] = 0.0

    loss.grad[None] = 1.0
    cube()
    cube.grad()
    clear_most()                      # x.grad[3] still holds the gradient at x[3] = 2.5
    x[3] = 2.0
    cube()
    with pytest.raises(ti.StaleGradientRuleError):
        cube.grad()
