"""Unsupported or wrong programs: each gets a clear error that names the user's source line.

Every offending line below carries the marker comment `# <- error`; the tests check that the
error points at exactly that line of this file."""
import inspect
import traceback

import numpy as np
import pytest

import tinyad as ti


def marked_line(fn) -> int:
    """The line number of the `# <- error` marker inside fn's source."""
    lines, first = inspect.getsourcelines(fn)
    for offset, text in enumerate(lines):
        if "# <- error" in text:
            return first + offset
    raise AssertionError(f"{fn.__name__} has no error marker")


def assert_points_at(exc_info, fn, *fragments):
    err = exc_info.value
    loc = getattr(err, "loc", None)
    assert loc is not None, f"error has no source location: {err}"
    assert loc.file == __file__
    assert loc.line == marked_line(fn), str(err)
    text = str(err)
    for fragment in fragments:
        assert fragment in text, text


@pytest.fixture
def fields(mode):
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    y = ti.field(ti.f32, shape=4, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)
    return x, y, loss


# ---- syntax a kernel may not use: TinyadSyntaxError (a SyntaxError) -------------------------

def _lambda_kernel(x):
    @ti.kernel
    def k():
        for i in x:
            f = lambda v: v * 2  # <- error  # noqa: E731
            x[i] = f(x[i])
    return k


def _try_kernel(x):
    @ti.kernel
    def k():
        try:  # <- error
            x[0] = 1
        except Exception:
            pass
    return k


def _undefined_name_kernel(x):
    @ti.kernel
    def k():
        for i in x:
            x[i] = undefined_thing * 2  # <- error  # noqa: F821
    return k


def _print_kernel(x):
    @ti.kernel
    def k():
        print(x[0], file=None)  # <- error
    return k


def _static_of_runtime_kernel(x):
    @ti.kernel
    def k():
        for i in x:
            if ti.static(x[i] > 0):  # <- error
                x[i] = 0
    return k


def _stepped_range_kernel(x):
    @ti.kernel
    def k():
        for i in range(0, 4, 2):  # <- error
            x[i] = 1
    return k


def _missing_annotation_kernel(x):
    @ti.kernel
    def k(a):  # <- error
        x[0] = a
    return k


def _return_without_type_kernel(x):
    @ti.kernel
    def k():
        return x[0]  # <- error
    return k


def _non_tail_return_kernel(x):
    @ti.kernel
    def k() -> ti.i32:
        i = 0
        while i < 4:
            if x[i] > 0:
                return i  # <- error
            i += 1
        return -1
    return k


SYNTAX_CASES = [
    (_lambda_kernel, ["Lambda", "@ti.func"]),
    (_try_kernel, ["Try"]),
    (_undefined_name_kernel, ["undefined_thing"]),
    (_print_kernel, ["print"]),
    (_static_of_runtime_kernel, ["ti.static"]),
    (_stepped_range_kernel, ["step"]),
    (_missing_annotation_kernel, ["'a'", "annotation"]),
    (_return_without_type_kernel, ["return type"]),
    (_non_tail_return_kernel, ["return", "last statement"]),
]


@pytest.mark.parametrize("make, fragments", SYNTAX_CASES, ids=[c[0].__name__ for c in SYNTAX_CASES])
def test_unsupported_syntax_names_the_line(fields, make, fragments):
    x, _, _ = fields
    kernel = make(x)
    with pytest.raises(ti.TinyadSyntaxError) as info:
        kernel()
    assert isinstance(info.value, SyntaxError)
    assert_points_at(info, make, *fragments)
    # Python's own printing of an uncaught one (and pytest's) reads SyntaxError's fields:
    # `text` must be the source line, as SyntaxError has it
    printed = "".join(traceback.format_exception_only(info.value))
    assert info.value.text.strip() in printed and fragments[0] in printed


# ---- type and shape errors: TinyadTypeError -------------------------------------------------

def _float_index_kernel(x):
    @ti.kernel
    def k():
        for i in x:
            x[i * 0.5] = 1  # <- error
    return k


def _wrong_index_count_kernel(x):
    @ti.kernel
    def k():
        for i in x:
            x[i, 0] = 1  # <- error
    return k


def _vector_shape_mismatch_kernel(x):
    @ti.kernel
    def k():
        a = ti.Vector([1.0, 2.0])
        b = ti.Vector([1.0, 2.0, 3.0])
        c = a + b  # <- error
        x[0] = c[0]
    return k


def _matrix_into_scalar_field_kernel(x):
    @ti.kernel
    def k():
        x[0] = ti.Vector([1.0, 2.0])  # <- error
    return k


def _int_bit_op_on_float_kernel(x):
    @ti.kernel
    def k():
        for i in x:
            x[i] = x[i] & 1  # <- error
    return k


TYPE_CASES = [
    (_float_index_kernel, ["float", "x"]),
    (_wrong_index_count_kernel, ["1 dimension", "2 index"]),
    (_vector_shape_mismatch_kernel, ["shape mismatch"]),
    (_matrix_into_scalar_field_kernel, ["x"]),
    (_int_bit_op_on_float_kernel, ["integer"]),
]


@pytest.mark.parametrize("make, fragments", TYPE_CASES, ids=[c[0].__name__ for c in TYPE_CASES])
def test_type_errors_name_the_line(fields, make, fragments):
    x, _, _ = fields
    with pytest.raises(ti.TinyadTypeError) as info:
        make(x)()
    assert_points_at(info, make, *fragments)


def test_kernel_argument_types(fields):
    x, _, _ = fields

    @ti.kernel
    def k(a: ti.f32, n: ti.i32):
        x[n] = a

    with pytest.raises(ti.TinyadTypeError, match="'a' is declared f32, got Field"):
        k(x, 0)
    with pytest.raises(ti.TinyadTypeError, match="'n' is declared i32, got the non-integer 1.5"):
        k(1.0, 1.5)
    with pytest.raises(ti.TinyadTypeError, match="missing a required argument"):
        k(1.0)


# ---- out-of-bounds indices --------------------------------------------------------------------

def test_out_of_bounds_in_kernel_names_field_index_shape_and_line(fields, mode):
    if mode == "fast":
        pytest.skip("fast mode checks bounds with ti.init(debug=True) only, as Taichi does "
                    "(tests/test_fast_backend.py tests that)")
    x, y, _ = fields

    def make(x):
        @ti.kernel
        def shift():
            for i in x:
                y[i] = x[i + 1]  # <- error
        return shift

    with pytest.raises(ti.TinyadIndexError) as info:
        make(x)()
    assert_points_at(info, make, "index (4,)", "field x", "shape (4,)")


def test_out_of_bounds_vector_component(mode):
    if mode == "fast":
        pytest.skip("fast mode checks bounds with ti.init(debug=True) only, as Taichi does "
                    "(tests/test_fast_backend.py tests that)")
    v = ti.Vector.field(3, ti.f32, shape=2)

    def make(v):
        @ti.kernel
        def k(n: ti.i32):
            v[n][0] = 1.0  # <- error
        return k

    with pytest.raises(ti.TinyadIndexError) as info:
        make(v)(5)
    assert_points_at(info, make, "index (5,)", "field v", "shape (2,)")


def test_out_of_bounds_in_python_scope(fields):
    x, _, _ = fields
    with pytest.raises(ti.TinyadIndexError, match=r"index \(7,\) is out of bounds for field x"):
        x[7] = 1.0
    with pytest.raises(ti.TinyadIndexError, match="has 1 dimension"):
        _ = x[1, 2]


# ---- fields and numpy ------------------------------------------------------------------------

def test_from_numpy_shape_and_dtype_are_checked(mode):
    x = ti.field(ti.f32, shape=(3, 2))
    v = ti.Vector.field(2, ti.f32, shape=3)
    n = ti.field(ti.i32, shape=3)
    with pytest.raises(ti.TinyadTypeError, match=r"field x has shape \(3, 2\).*array has shape \(2, 3\)"):
        x.from_numpy(np.zeros((2, 3)))
    with pytest.raises(ti.TinyadTypeError, match=r"field v has shape \(3, 2\)"):
        v.from_numpy(np.zeros(3))
    with pytest.raises(ti.TinyadTypeError, match="astype"):
        n.from_numpy(np.zeros(3, dtype=np.float64))


def test_integer_fields_cannot_need_grad(mode):
    with pytest.raises(ti.TinyadTypeError, match="only float fields can have needs_grad"):
        ti.field(ti.i32, shape=3, needs_grad=True)


def test_reading_an_unplaced_gradient_names_the_line(mode):
    x = ti.field(ti.f32, shape=3)

    def make(x):
        @ti.kernel
        def k():
            for i in x:
                x.grad[i] = 0  # <- error
        return k

    with pytest.raises(ti.TinyadRuntimeError) as info:
        make(x)()
    assert_points_at(info, make, "x.grad has not been placed", "needs_grad=True")


# ---- Tape misuse ------------------------------------------------------------------------------

def test_tape_loss_must_be_0d(fields):
    x, _, _ = fields
    with pytest.raises(RuntimeError, match="The loss of Tape must be a 0-D field, i.e. scalar"):
        with ti.ad.Tape(loss=x):
            pass


def test_tape_loss_needs_a_gradient(mode):
    loss = ti.field(ti.f32, shape=())
    with pytest.raises(RuntimeError, match="Gradients of loss are not allocated"):
        with ti.ad.Tape(loss=loss):
            pass


def test_tape_enters_once_and_does_not_nest(fields):
    _, _, loss = fields
    tape = ti.ad.Tape(loss=loss)
    with tape:
        with pytest.raises(RuntimeError, match="do not nest"):
            with ti.ad.Tape(loss=loss):
                pass
    with pytest.raises(RuntimeError, match="entered only once"):
        with tape:
            pass


# ---- shapes the reverse transform cannot handle ---------------------------------------------

def test_break_in_parallel_loop(fields):
    x, _, _ = fields

    def make(x):
        @ti.kernel
        def k():
            for i in x:
                if x[i] > 0:
                    break  # <- error
        return k

    with pytest.raises(ti.KernelSimplicityRuleError) as info:
        make(x)()
    assert_points_at(info, make, "break")


def test_func_called_from_python_scope(mode):
    @ti.func
    def f(v):
        return v * 2

    with pytest.raises(ti.TinyadTypeError, match="can only be called from a kernel"):
        f(1.0)


def test_a_typo_on_ti_suggests_the_public_name():
    with pytest.raises(AttributeError) as info:
        ti.feild(ti.f32, shape=4)
    assert isinstance(info.value, ti.TinyadError)
    assert "ti.field" in info.value.hint and "core" not in info.value.hint
    assert not hasattr(ti, "no_such_thing")          # hasattr still works


def test_a_taichi_feature_left_out_says_so_by_name():
    with pytest.raises(ti.TinyadError, match="tinyad has no ti.GUI"):
        ti.GUI("window", (64, 64))
    with pytest.raises(ti.TinyadError, match="ti.linalg.*not in tinyad") as info:
        ti.linalg.SparseMatrixBuilder(4, 4, max_num_triplets=16)
    assert "scipy" in info.value.hint


def test_ti_ui_may_be_named_and_calling_it_says_it_is_left_out():
    """TinyDiffRast's package annotates `window: ti.ui.Window` in a class that every program
    imports, windowed or not: the import stopped a headless run at the annotation."""
    def track_inputs(window: ti.ui.Window) -> None:
        return None

    assert track_inputs(None) is None and "not in tinyad" in repr(ti.ui.Window)
    with pytest.raises(ti.TinyadError, match=r"tinyad has no ti\.ui\.Window: Taichi's GGUI") as info:
        ti.ui.Window("training", res=(64, 64))
    assert "matplotlib" in info.value.hint
    with pytest.raises(ti.TinyadError, match=r"ti\.ui\.Window\.get_canvas"):
        ti.ui.Window.get_canvas()


def test_a_dynamic_list_operation_says_tinyad_has_none(mode):
    """TinyDiffRast's rasterizer queues triangles per tile with `queue[x, y].append(t)` on a
    ti.root...dynamic field: tinyad said "indexed with 2 index(es), give one per dimension"."""
    queue = ti.field(ti.i32)
    ti.root.dense(ti.ij, (2, 2)).dynamic(ti.k, 8, chunk_size=4).place(queue)

    @ti.kernel
    def enqueue():
        for x, y in ti.ndrange(2, 2):
            queue[x, y].append(x + y)

    @ti.kernel
    def dense_use():                     # every index given: the dense storage is fine
        for x, y in ti.ndrange(2, 2):
            queue[x, y, 3] = x + y

    with pytest.raises(ti.TinyadError, match=r"queue is placed under ti\.root\.\.\.dynamic") as info:
        enqueue()
    assert "queue[x, y].append(x + y)" in str(info.value) and "atomic_add" in info.value.hint
    dense_use()
    assert queue.to_numpy()[:, :, 3].tolist() == [[0, 1], [1, 2]]
    with pytest.raises(ti.TinyadError, match=r"tinyad has no ti\.append: sparse and dynamic"):
        ti.append(queue.snode.parent(), [0, 0], 1)


def test_ti_types_names_what_it_lacks():
    """A cloth program annotates a kernel argument `ti.types.sparse_matrix_builder()`:
    Python's bare AttributeError from inside tinyad was all it got."""
    with pytest.raises(ti.TinyadError, match="ti.types.sparse_matrix_builder: sparse"):
        ti.types.sparse_matrix_builder()
    with pytest.raises(AttributeError) as info:      # (still an AttributeError: hasattr works)
        ti.types.vectr(3, ti.f32)
    assert info.value.hint == "did you mean ti.types.vector?"
    assert not hasattr(ti.types, "no_such_type") and hasattr(ti.types, "ndarray")


def test_a_typo_in_a_kernel_names_the_line_and_the_right_name(mode):
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def k():
        for i in x:
            x[i] = ti.sine(1.0)

    with pytest.raises(ti.TinyadSyntaxError) as info:
        k()
    assert "ti.sin" in str(info.value) and info.value.loc.text.strip() == "x[i] = ti.sine(1.0)"


def test_a_missing_annotation_names_the_ndarray_type_for_an_array():
    """A numpy array passed to an unannotated parameter: the hint named ti.template(), which
    then failed on the array; ti.types.ndarray() is the annotation an array takes."""
    @ti.kernel
    def first(a) -> ti.f32:
        return a[0]

    with pytest.raises(ti.TinyadSyntaxError, match="needs a type annotation") as error:
        first(np.ones(3, np.float32))
    assert "`a: ti.types.ndarray()` (a numpy array)" in str(error.value.hint)
