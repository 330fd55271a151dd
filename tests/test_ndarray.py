"""ti.ndarray and ti.types.ndarray() kernel arguments: Python-scope access, kernels over them,
their gradients (Tape and kernel.grad, checked against finite differences and formulas), numpy
arrays passed directly, trace sharing, and the rule checker over ndarray elements."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tinyad as ti
from tests.cuda_simulator import simulator_program
from tests.gradcheck import finite_difference


def test_python_scope_access(mode):
    a = ti.ndarray(ti.f64, shape=(2, 3), needs_grad=True)
    assert a.shape == (2, 3) and a.dtype == ti.f64
    a[1, 2] = 4.5
    assert a[1, 2] == 4.5 and a.to_numpy()[1, 2] == 4.5
    a.fill(1.5)
    assert (a.to_numpy() == 1.5).all()
    a.from_numpy(np.arange(6.0).reshape(2, 3))
    assert a[1, 0] == 3.0
    assert a.grad.shape == (2, 3) and not a.grad.to_numpy().any()
    assert ti.ndarray(ti.i32, shape=4).grad is None
    v = ti.ndarray(ti.math.vec2, shape=3)
    v[1] = [1.0, 2.0]
    assert v.to_numpy().shape == (3, 2) and v[1][1] == 2.0


def test_int_ndarray_has_no_gradient(mode):
    with pytest.raises(ti.TinyadRuntimeError, match="i32 is not supported for ndarray"):
        ti.ndarray(ti.i32, shape=3, needs_grad=True)


def _loss_kernel():
    @ti.kernel
    def loss_of(a: ti.types.ndarray(), b: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in a:
            loss[None] += ti.sin(a[i]) * b[i] ** 2 + a[i] * b[(i + 1) % 4]
    return loss_of


def test_tape_gradient_matches_finite_differences(mode):
    loss_of = _loss_kernel()
    a = ti.ndarray(ti.f64, shape=4, needs_grad=True)
    b = ti.ndarray(ti.f64, shape=4, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    a.from_numpy(np.array([0.3, -1.2, 2.0, 0.7]))
    b.from_numpy(np.array([1.1, 0.4, -0.8, 1.9]))
    with ti.ad.Tape(loss=loss):
        loss_of(a, b, loss)

    def run():
        loss.fill(0)
        loss_of(a, b, loss)
        return loss[None]

    got_a, got_b = a.grad.to_numpy(), b.grad.to_numpy()
    np.testing.assert_allclose(got_a, finite_difference(run, a), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got_b, finite_difference(run, b), rtol=1e-6, atol=1e-8)


def test_kernel_grad_over_vector_ndarrays(mode):
    @ti.kernel
    def scale(a: ti.types.ndarray(dtype=ti.math.vec2), p: ti.types.ndarray(), z: ti.math.vec2):
        for i in p:
            p[i] = a[i] * a[i] * z

    n = 5
    a = ti.ndarray(ti.types.vector(2, ti.f64), shape=n, needs_grad=True)
    p = ti.ndarray(ti.types.vector(2, ti.f64), shape=n, needs_grad=True)
    values = np.arange(2.0 * n).reshape(n, 2) - 3.0
    a.from_numpy(values)
    scale(a, p, ti.Vector([2.0, 3.0]))
    np.testing.assert_allclose(p.to_numpy(), values ** 2 * [2.0, 3.0])
    p.grad.fill(1.0)
    scale.grad(a, p, ti.Vector([2.0, 3.0]))
    np.testing.assert_allclose(a.grad.to_numpy(), 2 * values * [2.0, 3.0])   # d(z a^2)/da


def test_needs_grad_false_argument_gets_no_gradient(mode):
    @ti.kernel
    def f(x: ti.types.ndarray(needs_grad=False), w: ti.types.ndarray(), y: ti.types.ndarray()):
        for i in range(3):
            y[0] += x[i] * w[i]

    x = ti.ndarray(ti.f64, shape=3, needs_grad=True)
    w = ti.ndarray(ti.f64, shape=3, needs_grad=True)
    y = ti.ndarray(ti.f64, shape=1, needs_grad=True)
    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    w.from_numpy(np.array([0.5, -1.0, 4.0]))
    f(x, w, y)
    y.grad.fill(1.0)
    f.grad(x, w, y)
    assert not x.grad.to_numpy().any()
    np.testing.assert_allclose(w.grad.to_numpy(), [1.0, 2.0, 3.0])


def test_numpy_arrays_are_written_through(mode):
    @ti.kernel
    def double(x: ti.types.ndarray(), out: ti.types.ndarray()):
        for i, j in x:
            out[i, j] = 2 * x[i, j] + i

    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    out = np.zeros((2, 3))
    double(x, out)
    np.testing.assert_allclose(out, 2 * x + np.array([[0.0], [1.0]]))


def test_one_trace_per_shape_and_dtype(mode):
    @ti.kernel
    def add_one(x: ti.types.ndarray()):
        for i in x:
            x[i] += 1

    a, b = ti.ndarray(ti.f64, shape=4), ti.ndarray(ti.f64, shape=4)
    add_one(a)
    add_one(b)
    add_one(b)
    assert len(add_one._traces) == 1          # same dtype and shape: one trace
    assert a[0] == 1.0 and b[0] == 2.0        # each launch wrote its own array
    if mode == "fast":                        # ... and one compiled program for both arrays
        (traced,) = add_one._traces.values()
        assert traced.has_program("primal") and len(traced._bindings) == 2
        assert not any(bound._programs for bound in traced._bindings.values())
    add_one(ti.ndarray(ti.f64, shape=7))
    add_one(np.zeros(4, dtype=np.float32))
    assert len(add_one._traces) == 3


def test_ir_names_ndarray_arguments_by_parameter(mode):
    @ti.kernel
    def copy(src: ti.types.ndarray(), dst: ti.types.ndarray()):
        for i in src:
            dst[i] = src[i]

    copy(ti.ndarray(ti.f64, shape=2), ti.ndarray(ti.f64, shape=2))
    text = str(copy.ir)
    assert "dst[i] = src[i]" in text
    assert "kernel copy(src: ndarray(f64, (2,)), dst: ndarray(f64, (2,))):" in text


def test_argument_checks(mode):
    @ti.kernel
    def f(x: ti.types.ndarray(dtype=ti.f64, ndim=1)):
        for i in x:
            x[i] = 1.0

    with pytest.raises(ti.TinyadTypeError, match="declared f64, got an ndarray of f32"):
        f(ti.ndarray(ti.f32, shape=2))
    with pytest.raises(ti.TinyadTypeError, match="ndim=1"):
        f(ti.ndarray(ti.f64, shape=(2, 2)))
    with pytest.raises(ti.TinyadTypeError, match="got a field"):
        f(ti.field(ti.f64, shape=2))
    with pytest.raises(ti.TinyadTypeError, match="not contiguous"):
        f(np.zeros((4, 2))[:, 0])


def test_a_numpy_array_in_fortran_order_is_copied_in_and_back_as_taichi_does(mode):
    """A transpose (DFSPH_difftaichi passes `positions.T`): the kernel reads a copy in C order,
    and what it writes is copied back into the user's array after the launch."""
    @ti.kernel
    def scale(a: ti.types.ndarray(), out: ti.types.ndarray()):
        for i, j in a:
            out[i, j] = a[i, j] * 10 + i
            a[i, j] += 1

    a = np.arange(6.0).reshape(3, 2).T
    out = np.zeros((3, 2)).T
    assert a.flags.f_contiguous and not a.flags.c_contiguous
    scale(a, out)
    assert a.tolist() == [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]
    assert out.tolist() == [[0.0, 20.0, 40.0], [11.0, 31.0, 51.0]]


def test_taichis_older_spellings_of_the_element_type(mode):
    # DiffTaichi's diffmpm3d: init(x_: ti.types.ndarray(element_dim=1)) takes (n, 3) positions
    x = ti.Vector.field(3, ti.f64, shape=4)
    m = ti.Matrix.field(2, 2, ti.f64, shape=2)

    @ti.kernel
    def load(x_: ti.types.ndarray(element_dim=1), m_: ti.types.ndarray(element_shape=(2, 2))):
        for i in range(4):
            x[i] = x_[i] * 2
        for i in range(2):
            m[i] = m_[i].transpose()

    positions = np.arange(12.0).reshape(4, 3)
    mats = np.arange(8.0).reshape(2, 2, 2)
    load(positions, mats)
    np.testing.assert_array_equal(x.to_numpy(), 2 * positions)
    np.testing.assert_array_equal(m.to_numpy(), mats.transpose(0, 2, 1))
    with pytest.raises(ti.TinyadTypeError, match="element_dim=1"):
        load(ti.ndarray(ti.f64, shape=4), mats)
    with pytest.raises(ti.TinyadTypeError, match=r"shape \(4,\) leaves none to index"):
        load(np.zeros(4), mats)
    with pytest.raises(ti.TinyadTypeError, match="matrices"):
        ti.types.ndarray(element_dim=3)
    with pytest.raises(ti.TinyadTypeError, match="ndim="):
        ti.types.ndarray(field_dim=1)


def test_tape_loss_must_be_one_element_with_gradient(mode):
    with pytest.raises(ti.TinyadRuntimeError, match="only one element"):
        with ti.ad.Tape(loss=ti.ndarray(ti.f64, shape=2, needs_grad=True)):
            pass
    with pytest.raises(ti.TinyadRuntimeError, match="Gradients of loss are not allocated"):
        with ti.ad.Tape(loss=ti.ndarray(ti.f64, shape=1)):
            pass


def test_reading_a_gradient_is_not_differentiated(mode):
    @ti.kernel
    def total(x: ti.types.ndarray(), s: ti.types.ndarray()):
        for i in x:
            s[None] += x.grad[i]

    x = ti.ndarray(ti.f64, shape=3, needs_grad=True)
    s = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    x.grad.fill(2.0)
    total(x, s)
    assert s[None] == 6.0
    s.grad[None] = 1.0
    with pytest.raises(ti.TinyadRuntimeError, match="differentiate through a grad tensor"):
        total.grad(x, s)


def test_checker_sees_one_array_through_two_kernels(mode):
    """`square` reads x under the name src, `reset` overwrites it under the name z: one array,
    so the Tape's backward pass would replay a value that is gone."""
    @ti.kernel
    def square(src: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in src:
            loss[None] += src[i] ** 2

    @ti.kernel
    def reset(z: ti.types.ndarray()):
        for i in z:
            z[i] = 0.0

    x = ti.ndarray(ti.f64, shape=3, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    x.fill(1.0)
    with pytest.raises(ti.ReadThenOverwriteRuleError, match=r"x\[0\] was read, then changed"):
        with ti.ad.Tape(loss=loss):
            square(x, loss)
            reset(x)


def test_checker_keys_on_arrays_not_parameters(mode):
    """`a` is read as `step`'s u, then overwritten as `step`'s v: the checker sees one array
    under two parameters and names the rule at the write (not only at the replay)."""
    @ti.kernel
    def step(u: ti.types.ndarray(), v: ti.types.ndarray()):
        for i in u:
            v[i] = u[i] ** 2

    @ti.kernel
    def total(v: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in v:
            loss[None] += v[i]

    a, b, c = (ti.ndarray(ti.f64, 3, needs_grad=True) for _ in range(3))
    loss = ti.ndarray(ti.f64, (), needs_grad=True)
    a.fill(1.0)
    c.fill(3.0)
    with pytest.raises(ti.ReadThenOverwriteRuleError, match=r"\[0\] was read, then changed"):
        with ti.ad.Tape(loss=loss):
            step(a, b)
            step(c, a)
            total(b, loss)


def test_checker_keeps_arrays_of_one_kernel_apart(mode):
    """The same kernel launched on two arrays: no element is read then overwritten, and the
    gradients are those of each launch (d/dx of x^2 + y^2 summed)."""
    @ti.kernel
    def square(src: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in src:
            loss[None] += src[i] ** 2

    x = ti.ndarray(ti.f64, shape=3, needs_grad=True)
    y = ti.ndarray(ti.f64, shape=3, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    y.from_numpy(np.array([-1.0, 0.5, 4.0]))
    with ti.ad.Tape(loss=loss):
        square(x, loss)
        square(y, loss)
    assert loss[None] == pytest.approx(14.0 + 17.25)
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0, 4.0, 6.0])
    np.testing.assert_allclose(y.grad.to_numpy(), [-2.0, 1.0, 8.0])


def test_python_write_between_forward_and_backward_is_caught(mode):
    @ti.kernel
    def square(src: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in src:
            loss[None] += src[i] ** 2

    x = ti.ndarray(ti.f64, shape=3, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    x.fill(1.0)
    with pytest.raises(ti.AutodiffRuleError):
        with ti.ad.Tape(loss=loss):
            square(x, loss)
            x[1] = 5.0


CUDA_SCRIPT = simulator_program('''
import numpy as np
import tinyad as ti
ti.init(mode="fast", arch=ti.cuda)

@ti.kernel
def square(x: ti.types.ndarray(), loss: ti.types.ndarray()):
    for i in x:
        loss[None] += x[i] ** 2

@ti.kernel
def double(x: ti.types.ndarray()):
    for i in x:
        x[i] *= 2

a = ti.ndarray(ti.f32, 4, needs_grad=True)
b = ti.ndarray(ti.f32, 4, needs_grad=True)
loss = ti.ndarray(ti.f32, (), needs_grad=True)
a.from_numpy(np.arange(4, dtype=np.float32))
b.fill(2.0)
with ti.ad.Tape(loss=loss):
    square(a, loss)
    square(b, loss)
z = np.ones(3, np.float32)
double(z)
z[0] = 5.0            # written by the user between launches: sent again
double(z)
print(json.dumps({"backend": type(ti.runtime.runtime.backend.storage).__name__,
                  "loss": loss[None], "a": a.grad.to_numpy().tolist(),
                  "b": b.grad.to_numpy().tolist(), "z": z.tolist()}))
''')


def test_cuda_binds_each_launch_to_its_arrays(tmp_path):
    """CUDA fast mode (numba's simulator, in a fresh process): one compiled kernel launched on
    two ndarrays keeps their device copies apart, and a numpy array is written through."""
    script = tmp_path / "program.py"
    script.write_text(CUDA_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root, NUMBA_ENABLE_CUDASIM="1",
               TINYAD_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["backend"] == "DeviceMirror"
    assert out["loss"] == pytest.approx(14.0 + 16.0)
    np.testing.assert_allclose(out["a"], [0.0, 2.0, 4.0, 6.0])
    np.testing.assert_allclose(out["b"], [4.0, 4.0, 4.0, 4.0])
    np.testing.assert_allclose(out["z"], [10.0, 4.0, 4.0])


def test_gradient_checks_take_ndarrays(mode):
    """ti.ad.verify (sympy and finite differences) and Tape(grad_check=...) restore ndarrays
    between their runs as they restore fields."""
    @ti.kernel
    def f(x: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in x:
            loss[None] += ti.sin(x[i]) * x[i]

    x = ti.ndarray(ti.f64, shape=3, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    x.from_numpy(np.array([0.5, 1.0, -2.0]))
    report = ti.ad.verify(lambda: f(x, loss), loss, [x], method="both")
    assert report.ok and len(report.entries) == 3
    x.grad.fill(0)        # the Tape leaves ndarrays' gradients to the program, as in Taichi
    with ti.ad.Tape(loss=loss, grad_check=[x]):
        f(x, loss)
    values = x.to_numpy()
    np.testing.assert_allclose(x.grad.to_numpy(), np.cos(values) * values + np.sin(values))


def test_int_ndarray_as_loop_bound_with_a_mutated_local(mode):
    """Taichi's test_ad_power over ndarrays: p = a ** b by repeated products, b an i32 ndarray;
    dp/da = b a^(b-1)."""
    @ti.kernel
    def power(a: ti.types.ndarray(), b: ti.types.ndarray(), p: ti.types.ndarray()):
        for i in a:
            ret = 1.0
            for _ in range(b[i]):
                ret = ret * a[i]
            p[i] = ret

    n = 6
    a = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    b = ti.ndarray(ti.i32, shape=n)
    p = ti.ndarray(ti.f64, shape=n, needs_grad=True)
    a.from_numpy(np.linspace(0.5, 2.0, n))
    b.from_numpy(np.arange(n, dtype=np.int32))
    power(a, b, p)
    base, exponent = a.to_numpy(), np.arange(n)
    np.testing.assert_allclose(p.to_numpy(), base ** exponent)
    p.grad.fill(1.0)
    power.grad(a, b, p)
    np.testing.assert_allclose(a.grad.to_numpy(), exponent * base ** np.maximum(exponent - 1, 0))


def test_branches_and_repeated_tapes(mode):
    """A branch on the array's value; a second Tape adds to the ndarray's gradient (the Tape
    clears only fields' gradients, as in Taichi)."""
    @ti.kernel
    def f(x: ti.types.ndarray(), loss: ti.types.ndarray()):
        for i in x:
            if x[i] > 0:
                loss[None] += x[i] ** 3
            else:
                loss[None] += -2.0 * x[i]

    x = ti.ndarray(ti.f64, shape=4, needs_grad=True)
    loss = ti.ndarray(ti.f64, shape=(), needs_grad=True)
    values = np.array([-1.5, 0.5, 2.0, -0.25])
    x.from_numpy(values)
    expected = np.where(values > 0, 3 * values ** 2, -2.0)
    with ti.ad.Tape(loss=loss):
        f(x, loss)
    np.testing.assert_allclose(x.grad.to_numpy(), expected)
    with ti.ad.Tape(loss=loss):
        f(x, loss)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * expected)
    assert loss[None] == pytest.approx(np.where(values > 0, values ** 3, -2 * values).sum())


def test_vector_ndarrays_of_taichis_ad_sum_vector_and_ad_vector_arg(mode):
    """Taichi's test_ad_sum_vector / test_ad_vector_arg assert `p[i] == [a[i] * 2, a[i] * 3]`,
    which a numpy row fails; the values they mean: p = 2 a, a.grad = 2."""
    @ti.kernel
    def doubled(a: ti.types.ndarray(), p: ti.types.ndarray()):
        for i in p:
            p[i] = a[i] * 2

    @ti.kernel
    def scaled(a: ti.types.ndarray(), p: ti.types.ndarray(), z: ti.math.vec2):
        for i in p:
            p[i] = a[i] * z[0]

    for kernel, extra in ((doubled, ()), (scaled, (ti.math.vec2([2.0, 3.0]),))):
        a = ti.ndarray(ti.math.vec2, shape=4, needs_grad=True)
        p = ti.ndarray(ti.math.vec2, shape=4, needs_grad=True)
        for i in range(4):
            a[i] = [3, 3]
        kernel(a, p, *extra)
        assert p.to_numpy().tolist() == [[6.0, 6.0]] * 4
        p.grad.fill(1.0)
        kernel.grad(a, p, *extra)
        assert a.grad.to_numpy().tolist() == [[2.0, 2.0]] * 4
