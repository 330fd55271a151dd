"""Language semantics that Taichi's own tests (tests/python in Taichi's repository: test_ndrange,
test_logical_op, test_linalg, test_matrix, test_element_wise, test_ssa, test_return) found
tinyad getting silently wrong. Each expected value is Taichi 1.7's (and Python's) answer."""
import math

import numpy as np
import pytest

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


def test_and_or_on_vectors_go_entry_by_entry(mode):
    # biaxialFem99.py (guanshaoheng/mpm-ml-dem) writes `(pos < 0 and vel < 0) or (...)` on
    # vectors: both ends were folded as Python objects, every entry 1 (or a crash on `cond[j]`)
    p = ti.Vector.field(2, ti.f32, shape=3)
    v = ti.Vector.field(2, ti.f32, shape=3)
    out = ti.Vector.field(2, ti.i32, shape=3)
    mixed = ti.Vector.field(3, ti.i32, shape=3)

    @ti.kernel
    def walls(a: ti.i32):
        for i in range(3):
            cond = (p[i] < 0 and v[i] < 0) or (p[i] > 1 and v[i] > 0)
            for j in ti.static(range(2)):
                out[i][j] = 1 if cond[j] else 0
        u = ti.Vector([2, 0, a])
        w = ti.Vector([3, 5, 0])
        mixed[0] = u and w
        mixed[1] = u or w
        mixed[2] = (a > 3) and w        # a scalar with a vector: the scalar meets every entry

    p.from_numpy(np.array([[-1, 2], [0.5, -1], [2, 2]], np.float32))
    v.from_numpy(np.array([[-1, 1], [1, -1], [1, -1]], np.float32))
    walls(4)
    assert out.to_numpy().tolist() == [[1, 1], [0, 1], [1, 0]]   # Taichi 1.7.4's
    assert mixed.to_numpy().tolist() == [[1, 0, 0], [1, 1, 1], [1, 1, 0]]


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



def test_math_vector_types_hold_floats(mode):
    out = ti.Vector.field(3, ti.f64, shape=2)

    @ti.kernel
    def halves():
        a = ti.math.vec3(1, 2, 3)      # Taichi's vec3 is a float vector: its halves are kept
        a /= 2
        out[0] = a
        b = ti.math.ivec3(1.5, 2.5, 3.5)
        out[1] = b

    halves()
    assert out.to_numpy().tolist() == [[0.5, 1.0, 1.5], [1, 2, 3]]


def test_a_chained_assignment_gives_every_target_the_same_value(mode):
    @ti.kernel
    def chained() -> ti.i32:
        a = 1
        b = 1
        a = b = a + b                  # b was given a + b again, after a changed: 3
        return a * 10 + b

    assert chained() == 22


# ---- errors where there were internal errors, and what Taichi's tests use that was missing ----

def test_loop_bounds_read_from_fields(mode):
    a, b = ti.field(ti.i32, shape=()), ti.field(ti.i32, shape=())
    grid = ti.field(ti.i32, shape=(4, 4))

    @ti.kernel
    def paint():
        for i, j in ti.ndrange(a[None], b[None]):
            grid[i, j] = i * 4 + j + 1

    a[None], b[None] = 3, 2
    paint()
    expected = np.zeros((4, 4), np.int32)
    expected[:3, :2] = np.arange(16).reshape(4, 4)[:3, :2] + 1
    assert (grid.to_numpy() == expected).all()


def test_a_static_index_vector_picks_a_matrix_entry(mode):
    x = ti.Matrix.field(2, 3, dtype=ti.f32, shape=4)
    total = ti.field(ti.f32, shape=())

    @ti.kernel
    def fill_and_read():
        for i in x:
            for I in ti.static(ti.grouped(ti.ndrange(2, 3))):
                x[i][I] = I[0] + I[1] * 10 + i
        for I in ti.static(ti.grouped(ti.ndrange(2, 3))):
            total[None] += x[3][I]

    fill_and_read()
    k, l = np.meshgrid(range(2), range(3), indexing="ij")
    assert (x.to_numpy()[2] == k + 10 * l + 2).all()
    assert total[None] == (k + 10 * l + 3).sum()


def test_fill_inside_a_kernel(mode):
    grid = ti.field(ti.i32, shape=(4, 7))
    vectors = ti.Vector.field(3, ti.f32, shape=5)

    @ti.kernel
    def fill(v: ti.i32):
        grid.fill(v)
        vectors.fill(ti.Vector([1.0, 2.0, v]))

    fill(3)
    assert (grid.to_numpy() == 3).all()
    assert (vectors.to_numpy() == [1, 2, 3]).all()


def test_fields_of_vector_types_and_their_gradient(mode):
    x = ti.field(ti.types.vector(3, ti.f64), shape=4, needs_grad=True)
    y = ti.math.vec2.field(shape=(2, 2))
    m = ti.types.matrix(2, 2, ti.i32).field(shape=3)
    assert (x.n, x.m, x.shape, y.n, y.shape, m.n, m.m) == (3, 1, (4,), 2, (2, 2), 2, 2)
    assert m.dtype == ti.i32 and x.name == "x"
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def energy():
        for i in x:
            loss[None] += x[i].norm_sqr()

    values = np.arange(12.0).reshape(4, 3)
    x.from_numpy(values)
    with ti.ad.Tape(loss):
        energy()
    assert loss[None] == (values ** 2).sum()
    assert np.allclose(x.grad.to_numpy(), 2 * values)      # d|x|^2/dx = 2x


def test_a_kernel_returning_a_vector_is_refused_clearly(mode):
    @ti.kernel
    def corner() -> ti.types.vector(3, ti.i32):
        return ti.Vector([1, 2, 3])

    with pytest.raises(ti.TinyadTypeError, match="kernel corner returns ti.types.vector"):
        corner()


def test_integer_literals_a_type_cannot_hold(mode):
    out = ti.field(ti.i64, shape=())

    @ti.kernel
    def too_big():
        out[None] = ti.i64(1) * 3000000000

    @ti.kernel
    def typed() -> ti.u64:
        return ti.u64(9223372036854775808) + ti.u64(1)

    @ti.kernel
    def negative_u16() -> ti.i32:
        return ti.u16(-1)

    with pytest.raises(ti.TinyadTypeError, match="3000000000 is outside the range of default_ip"):
        too_big()
    assert typed() == 2 ** 63 + 1
    with pytest.raises(ti.TinyadTypeError, match="-1 is outside the range of u16"):
        negative_u16()


def test_a_struct_member_converts_as_a_cast(mode):
    s0 = ti.types.struct(a=ti.f32, b=ti.i16)

    @ti.kernel
    def member() -> ti.f32:
        s = s0(a=1.5, b=65537)               # 65537 in 16 bits is 1, as Taichi has it
        return s.a + s.b

    assert member() == 2.5


def test_an_integer_to_a_negative_power(mode):
    ti.init(mode=mode, debug=True)       # interp checks always, fast mode with debug=True
    out = ti.field(ti.i32, shape=())

    @ti.kernel
    def constant_exponent(x: ti.i32, y: ti.template()):
        out[None] = x ** y

    @ti.kernel
    def run_time_exponent(x: ti.i32, y: ti.i32):
        out[None] = x ** y

    with pytest.raises(ti.TinyadTypeError, match="an integer to the power -10"):
        constant_exponent(10, -10)
    run_time_exponent(3, 4)
    assert out[None] == 81
    with pytest.raises(ti.TinyadRuntimeError, match="negative integer power"):
        run_time_exponent(10, -2)


def test_a_long_vector_indexed_at_run_time(mode):
    vec1024 = ti.types.vector(1024, ti.i32)

    @ti.kernel
    def total(a: vec1024) -> ti.i32:
        s = 0
        for i in range(1024):
            s += a[i] * (i % 3)
        return s

    assert total(vec1024(list(range(1024)))) == sum(i * (i % 3) for i in range(1024))


# ---- assert in kernels: Taichi's tests check their values with it (test_assert.py's cases) ----

def test_assert_in_a_kernel(mode):
    ti.init(mode=mode, debug=True, default_fp=ti.f64)    # fast mode checks asserts with debug
    x = ti.field(dtype=int, shape=16)
    x[10] = 42

    @ti.kernel
    def all_zero():
        for i in x:
            assert x[i] == 0, "x[%d] expect=%d got=%d" % (i, 0, x[i])

    @ti.kernel
    def negative():
        y = 0.5
        assert y < 0, f"y = {y}"

    @ti.kernel
    def in_range(v: ti.i32):
        assert 10 <= v < 20

    with pytest.raises(ti.TaichiAssertionError, match=r"x\[10\] expect=0 got=42"):
        all_zero()
    with pytest.raises(AssertionError, match=r"y = 0\.5"):
        negative()
    with pytest.raises(AssertionError, match=r"assert 10 <= v < 20"):
        in_range(5)
    in_range(15)
    x[10] = 0
    all_zero()


def test_an_assert_in_fast_mode_costs_nothing_without_debug():
    ti.init(mode="fast")
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def positive():
        for i in x:
            assert x[i] > 0
            x[i] += 1

    positive()                      # as in Taichi: asserts are checked with debug=True
    assert x.to_numpy().tolist() == [1, 1, 1, 1]


def test_an_assert_stays_out_of_the_adjoint(mode):
    x = ti.field(ti.f64, shape=8, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def energy(bad: ti.i32):
        for i in x:
            v = x[i] * 2
            assert i != bad, "bad at %d: v=%f" % (i, v)
            loss[None] += v * v

    values = np.linspace(0.5, 2.0, 8)
    x.from_numpy(values)
    with ti.ad.Tape(loss):
        energy(-1)
    assert np.allclose(x.grad.to_numpy(), 8 * values)        # d(2x)^2/dx = 8x
    assert "assert" in str(energy.ir) and "assert" not in str(energy.grad.ir)
    if mode == "interp":
        with pytest.raises(ti.TaichiAssertionError, match="bad at 3: v=2.285714"):
            with ti.ad.Tape(loss):
                energy(3)


# ---- Python scope ------------------------------------------------------------------------------

def test_python_scope_comparisons_are_entry_by_entry_and_true_when_all_hold(mode):
    a, b = ti.Vector([1, 2, 3]), ti.Vector([1, 2, 4])
    assert a == a and not (a == b) and a != b
    assert list(a == b) == [1, 1, 0] and (a == b).any() and not (a == b).all()
    assert not (a < 3) and a < 4            # every entry, not "a non-empty matrix"
    assert (a == [1, 2]) is False           # another shape
    x = ti.Vector.field(2, ti.f32, shape=3)
    x[1] = [6, 7]
    assert x[1] == [6, 7] and not (x[1] == [6, 8])


def test_vector_and_matrix_ndarrays_and_type_predicates(mode):
    a = ti.Vector.ndarray(3, ti.f64, shape=4)
    b = ti.Matrix.ndarray(2, 2, ti.i32, shape=2)

    @ti.kernel
    def fill(x: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in x:
            x[i] = ti.Vector([i, 2.0, 3.0])
        y[1] += ti.Matrix([[1, 2], [3, 4]])

    fill(a, b)
    assert a.to_numpy()[3].tolist() == [3, 2, 3]
    assert b.to_numpy()[1].tolist() == [[1, 2], [3, 4]]
    assert ti.types.is_integral(ti.i32) and not ti.types.is_integral(ti.f32)
    assert ti.types.is_signed(ti.i8) and not ti.types.is_signed(ti.u16)
    assert ti.types.is_real(float)


def test_an_ndrange_with_float_bounds_is_refused(mode):
    x = ti.field(ti.f32, shape=12)

    @ti.kernel
    def fractional():
        for i in ti.ndrange((1.1, 10.5)):    # was cast quietly to (1, 10)
            x[i] = 1.0

    @ti.kernel
    def float_argument(stop: ti.f32):
        for i in ti.ndrange(stop):
            x[i] = 1.0

    with pytest.raises(ti.TinyadTypeError, match="integer scalar or a tuple"):
        fractional()
    with pytest.raises(ti.TinyadTypeError, match="integer scalar or a tuple"):
        float_argument(3.0)


def test_raw_div_and_raw_mod_are_cs_division(mode):
    pairs = [(-10, -3), (-10, 3), (10, -3), (10, 3), (7, 7), (-7, 2), (0, 5)]
    out = ti.field(ti.i32, shape=(len(pairs), 2))
    real = ti.field(ti.f64, shape=2)

    @ti.kernel
    def c_style(a: ti.i32, b: ti.i32, row: ti.i32):
        out[row, 0] = ti.raw_div(a, b)
        out[row, 1] = ti.raw_mod(a, b)

    @ti.kernel
    def c_style_float(a: ti.f64, b: ti.f64):
        real[0] = ti.raw_div(a, b)
        real[1] = ti.raw_mod(a, b)

    for row, (a, b) in enumerate(pairs):
        c_style(a, b, row)
    assert out.to_numpy().tolist() == [[int(np.trunc(a / b)), int(np.fmod(a, b))]
                                       for a, b in pairs]
    c_style_float(-7.5, 2.0)
    assert real.to_numpy().tolist() == [-3.75, np.fmod(-7.5, 2.0)]
    assert (ti.raw_div(-7, 2), ti.raw_mod(-7, 2)) == (-3, -1)      # Python scope too


def test_zero_one_and_a_logical_shift(mode):
    x = ti.Matrix.field(2, 3, ti.f64, shape=())
    y = ti.Matrix.field(2, 3, ti.f64, shape=())
    s = ti.field(ti.i32, shape=4)

    @ti.kernel
    def meta(v: ti.i32):
        y[None] = ti.one(x[None]) * 2 + ti.zero(x[None])
        s[0] = ti.bit_shr(v, 3)                  # zeros come in from the left
        s[1] = ti.bit_shr(ti.i32(-8), 28)
        s[2] = ti.bit_shr(-8, 1)                 # two Python ints: Python's >>, as Taichi
        s[3] = v >> 3                            # the arithmetic shift keeps the sign

    x.fill(-2.3)
    meta(-100)
    assert (y.to_numpy() == 2).all()
    assert s.to_numpy().tolist() == [((2 ** 32 - 100) >> 3), 15, -4, -100 >> 3]   # Taichi 1.7.4's


def test_an_atomic_max_over_elements_the_loop_also_reads(mode):
    """Taichi's test_atomic_min_max_uint: every iteration reads x[I] and folds it into x[0]
    with an atomic. Interp's per-element log, which tells iterations apart by the kinds of
    access each element saw, laid out a first read's record by hand; once the bitwise atomics
    made the table of kinds longer, a later atomic on that element read past the record: an
    internal error."""
    x = ti.field(ti.u64, shape=100)

    @ti.kernel
    def fold_max():
        for i in x:
            x[i] = 0
        x[1] = ti.cast(1, ti.u64) << 63
        for i in x:
            ti.atomic_max(x[0], x[i])

    @ti.kernel
    def fold_min():
        for i in x:
            x[i] = ti.cast(1, ti.u64) << 63
        x[1] = 100
        for i in x:
            ti.atomic_min(x[0], x[i])

    fold_max()
    assert int(x[0]) == 2 ** 63
    fold_min()
    assert int(x[0]) == 100


def test_integer_vector_types_follow_default_ip(mode):
    """ti.math.ivec2 holds default_ip, uvec2 the unsigned type as wide, as in Taichi 1.7.4
    (Taichi's test_vector_types_f64; values checked against Taichi 1.7.4 itself). tinyad
    fixed them at i32 and u32: under default_ip=ti.i64, 2**40 became 0."""
    def entries(default_ip, big):
        ti.init(mode=mode, default_fp=ti.f64, default_ip=default_ip)
        out = ti.field(ti.u64, shape=2)

        @ti.kernel
        def store():
            out[0] = ti.math.uvec2(ti.u64(2 ** 63 - 1)).x
            out[1] = ti.u64(ti.math.ivec2(big, 1).x)

        store()
        return out.to_numpy().tolist()

    assert entries(ti.i64, 2 ** 40) == [2 ** 63 - 1, 2 ** 40]
    assert entries(ti.i32, 2 ** 20) == [2 ** 32 - 1, 2 ** 20]    # u32 and i32 entries


def test_printing_a_field_prints_its_values_as_taichi_does(mode):
    # print(x.grad) is how Taichi's users (and its issues) look at a gradient
    x = ti.field(ti.f32, shape=3, needs_grad=True)
    v = ti.Vector.field(2, ti.f32, shape=2)
    s = ti.field(ti.f64, shape=())
    x.from_numpy(np.array([1.0, 2.5, -3.0], np.float32))
    s[None] = 0.25
    assert str(x) == str(np.array([1.0, 2.5, -3.0], np.float32))
    assert str(x.grad) == str(np.zeros(3, np.float32)) and str(v) == str(np.zeros((2, 2)))
    assert str(s) == "0.25" and f"{s}" == "0.25"
    assert repr(x) == "<tinyad field x: f32 (3,)>"          # repr says what it is
    unplaced = ti.field(ti.f32)
    assert str(unplaced) == repr(unplaced) == "<tinyad field unplaced: f32 unplaced>"
    ti.init(mode=mode)                       # a field of an earlier ti.init has no values
    assert str(x) == repr(x)
