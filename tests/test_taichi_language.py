"""Language semantics that Taichi's own tests (tests/python in Taichi's repository: test_ndrange,
test_logical_op, test_linalg, test_matrix, test_element_wise, test_ssa, test_return) found
tinyad getting silently wrong. Each expected value is Taichi 1.7's (and Python's) answer."""
import math

import numpy as np

import tinyad as ti


def test_an_ndrange_with_an_empty_axis_runs_nothing(mode):
    @ti.kernel
    def count(i1: ti.i32, i2: ti.i32, j1: ti.i32, j2: ti.i32) -> ti.i32:
        n = 0
        for i, j in ti.ndrange((i1, i2), (j1, j2)):
            n += 1
        return n

    assert count(0, 10, 0, 20) == 200
    assert count(0, 10, 20, 0) == 0
    assert count(10, 0, 0, 20) == 0
    assert count(10, 0, 20, 0) == 0      # two negative extents made a positive count: 200


def test_and_or_on_integers_give_the_deciding_operand(mode):
    @ti.kernel
    def both(x: ti.i32, y: ti.i32) -> ti.i32:
        return x and y

    @ti.kernel
    def either(x: ti.i32, y: ti.i32) -> ti.i32:
        return x or y

    @ti.kernel
    def truth(x: ti.i32, y: ti.i32) -> ti.i32:
        return x < 3 and y > 1 or x == 7

    for x, y in [(1, 2), (2, 1), (0, 1), (1, 0), (0, 0), (5, -3)]:
        assert both(x, y) == (x and y)
        assert either(x, y) == (x or y)
        assert truth(x, y) == int(x < 3 and y > 1 or x == 7)
    assert "and" in str(truth.ir)        # comparisons keep the plain logic op


def test_any_and_all_of_a_matrix_look_at_every_entry(mode):
    a = ti.Matrix.field(2, 2, dtype=ti.i32, shape=())
    found = ti.field(ti.i32, shape=2)

    @ti.kernel
    def reduce():
        found[0] = any(a[None])
        found[1] = all(a[None])

    for entries in ([[0, 0], [0, 0]], [[1, 0], [0, 0]], [[0, 3], [0, -1]], [[1, 2], [3, 4]]):
        a[None] = entries
        reduce()
        flat = np.array(entries).ravel()
        assert list(found.to_numpy()) == [int(flat.any()), int(flat.all())]


def test_matrix_inequality_in_a_kernel_is_entry_by_entry(mode):
    y = ti.Vector.field(3, ti.f32, shape=())
    out = ti.Vector.field(3, ti.i32, shape=2)

    @ti.kernel
    def compare():
        out[0] = y[None] != ti.Vector([1.0, 5.0, 3.0])
        out[1] = ti.Vector([1.0, 5.0, 3.0]) == y[None]

    y[None] = [1, 2, 3]
    compare()
    assert out.to_numpy().tolist() == [[0, 1, 0], [1, 0, 1]]


def test_python_scope_swizzle_assignment_writes(mode):
    w, v = ti.Vector([5, -12]), ti.Vector([3, 4])
    w.y = v.x * w[0]
    assert w.to_numpy().tolist() == [5, 15]
    w.xy = 7, 8
    assert w.to_numpy().tolist() == [7, 8]

    u = ti.Vector.field(3, dtype=ti.i32, shape=2)
    u[1].y = 3                       # a field element's view writes through
    u[1].z = 4
    assert u.to_numpy().tolist() == [[0, 0, 0], [0, 3, 4]]


def test_a_call_whose_result_is_called_on_is_traced_once(mode):
    calls = ti.field(ti.i32, shape=())
    out = ti.field(ti.f32, shape=())

    @ti.func
    def counted():
        calls[None] += 1
        return ti.Vector([1.0, 2.0])

    @ti.kernel
    def assigned():
        out[None] = counted().sum()

    @ti.kernel
    def as_statement():
        counted().sum()

    assigned()
    assert (calls[None], out[None]) == (1, 3.0)     # the func's store ran twice
    as_statement()
    assert calls[None] == 2


def test_a_random_number_used_twice_is_drawn_once(mode):
    a = ti.Vector.field(2, ti.f64, shape=())

    @ti.kernel
    def unit():
        a[None] = ti.Vector([ti.random(), 1.0]).normalized()

    for _ in range(4):
        unit()
        assert math.isclose(a[None].norm_sqr(), 1.0, rel_tol=1e-12)
    assert str(unit.ir).count("random(") == 1


def test_a_funcs_declared_return_type_converts_its_result(mode):
    @ti.func
    def truncated(a: ti.f32) -> ti.i32:
        return a

    @ti.func
    def constant() -> ti.i32:
        return 1.5

    @ti.kernel
    def total(a: ti.f32) -> ti.f32:
        return truncated(a) + constant()

    assert total(1.5) == 2.0
    assert total(-2.7) == -1.0       # toward zero, as a cast
