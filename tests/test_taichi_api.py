"""Small parts of Taichi's everyday API: integer types, float/int as dtypes, static_assert,
Taichi's exception names."""
import numpy as np
import pytest

import tinyad as ti


@pytest.mark.parametrize("dtype, np_type", [(ti.i8, np.int8), (ti.i16, np.int16),
                                            (ti.u16, np.uint16), (ti.u32, np.uint32),
                                            (ti.u64, np.uint64)])
def test_integer_types_store_and_compute_as_numpy_does(mode, dtype, np_type):
    x = ti.field(dtype, shape=4)

    @ti.kernel
    def fill():
        for i in x:
            x[i] = ti.cast(i * 3 + 1, dtype)

    fill()
    assert x.to_numpy().dtype == np_type
    assert x.to_numpy().tolist() == [1, 4, 7, 10]


def test_unsigned_wins_over_signed_of_the_same_width():
    assert ti.types.u32 is ti.u32
    from tinyad.core.types import promote
    assert promote(ti.i32, ti.u32) == ti.u32 and promote(ti.u8, ti.i32) == ti.i32


def test_static_assert_is_checked_while_tracing(mode):
    x = ti.field(ti.f32, shape=3)

    @ti.kernel
    def sized(n: ti.template()):
        ti.static_assert(n == 3, "n must be 3")
        for i in range(n):
            x[i] = i

    sized(3)
    assert x.to_numpy().tolist() == [0, 1, 2]
    with pytest.raises(ti.TaichiCompilationError, match="n must be 3") as info:
        sized(4)
    assert "test_taichi_api.py" in str(info.value)     # names the user's line

    @ti.kernel
    def run_time(n: ti.i32):
        ti.static_assert(n == 3)

    with pytest.raises(ti.TinyadTypeError, match="Static assert with non-static condition"):
        run_time(3)                                      # (an internal error before)


def test_taichi_exception_names_catch_tinyad_errors(mode):
    x = ti.field(ti.f32, shape=2)
    with pytest.raises(ti.TaichiIndexError):
        x[5] = 1.0
    with pytest.raises(ti.TaichiRuntimeError):
        with ti.ad.Tape(x):     # the loss must be 0-D
            pass
    assert issubclass(ti.TaichiAssertionError, AssertionError)
    assert issubclass(ti.TaichiSyntaxError, ti.TaichiCompilationError)


def test_python_float_and_int_name_the_default_types_in_kernels(mode):
    m = ti.Matrix.field(2, 2, ti.f64, shape=())
    n = ti.field(ti.i32, shape=())

    @ti.kernel
    def build():
        m[None] = ti.Matrix.identity(float, 2) * 3 + ti.Matrix.zero(float, 2, 2)
        n[None] = ti.cast(7.9, int)

    build()
    assert m.to_numpy().tolist() == [[3.0, 0.0], [0.0, 3.0]]
    assert n[None] == 7


def test_gui_colour_helpers_are_taichis():
    """ti.rgb_to_hex / ti.hex_to_rgb, which Taichi's examples call to colour what they draw
    (fem128): the values Taichi 1.7.4 gives for the same input."""
    assert ti.rgb_to_hex([0.5, np.array([0.1, 1.2]), 0.0]).tolist() == [8329472, 8388352]
    assert ti.rgb_to_hex((1.0, 0.0, 0.2)) == 0xFF0033
    assert ti.hex_to_rgb(0x336699) == pytest.approx((0.2, 0.4, 0.6))


def test_algorithms_prefix_sum_and_sort_as_taichis(mode):
    """ti.algorithms from Python scope, on every backend (Taichi's prefix sum needs CUDA or
    Vulkan): an inclusive scan of the first n elements in place, a sort moving values along."""
    counts = ti.field(ti.i32, shape=6)
    counts.from_numpy(np.array([1, 2, 0, 4, 5, 6], dtype=np.int32))
    ti.algorithms.PrefixSumExecutor(5).run(counts)
    assert counts.to_numpy().tolist() == [1, 3, 3, 7, 12, 6]
    with pytest.raises(RuntimeError, match="Only ti.i32"):
        ti.algorithms.PrefixSumExecutor(2).run(ti.field(ti.f32, shape=2))

    keys = ti.field(ti.f32, shape=5)
    values = ti.Vector.field(2, ti.i32, shape=5)
    keys.from_numpy(np.array([0.5, -1.0, 3.0, 0.0, 2.0], dtype=np.float32))
    values.from_numpy(np.arange(10, dtype=np.int32).reshape(5, 2))
    ti.algorithms.parallel_sort(keys, values)
    assert keys.to_numpy().tolist() == [-1.0, 0.0, 0.5, 2.0, 3.0]
    assert values.to_numpy()[:, 0].tolist() == [2, 6, 0, 8, 4]
    with pytest.raises(TypeError, match="one entry per key"):
        ti.algorithms.parallel_sort(keys, ti.field(ti.i32, shape=4))
    with pytest.raises(TypeError, match="a 1-D field of numbers"):
        ti.algorithms.parallel_sort(values)


def test_simt_intrinsics_may_be_named_but_not_called(mode):
    """Taichi programs pick `ti.simt.block.sync` at import time for their CUDA path."""
    barrier = ti.simt.block.sync
    x = ti.field(ti.i32, shape=4)

    @ti.kernel
    def scan():
        for i in x:
            barrier()

    with pytest.raises(ti.TinyadSyntaxError, match="ti.simt.block.sync") as e:
        scan()
    assert e.value.loc.text.strip() == "barrier()"


def test_reset_forgets_fields_and_kernels_between_runs(mode):
    """ti.reset(), as Taichi's: programs that fit a model from several starts call it between
    runs. Each run starts afresh and gets the same gradient (2 (i+1) x_i); a field from before
    the reset is gone, with an error that says so."""
    def run():
        ti.init(mode=mode, default_fp=ti.f64)
        x = ti.field(ti.f64, 3, needs_grad=True)
        loss = ti.field(ti.f64, (), needs_grad=True)

        @ti.kernel
        def energy():
            for i in x:
                loss[None] += (i + 1) * x[i] ** 2

        x.from_numpy(np.array([1.0, -2.0, 0.5]))
        with ti.ad.Tape(loss):
            energy()
        return x, x.grad.to_numpy()

    _, first = run()
    old, _ = run()
    ti.reset()
    with pytest.raises(ti.TinyadRuntimeError, match=r"ti\.reset\(\)"):
        old[0] = 1.0
    _, again = run()
    expected = 2 * np.arange(1, 4) * np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(first, expected)
    np.testing.assert_allclose(again, expected)
