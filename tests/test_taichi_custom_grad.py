"""Gradients the user takes over or turns off, following Taichi's test_customized_grad.py,
test_no_grad.py and test_stop_grad.py: grad_replaced / grad_for under a Tape and called by hand,
through a plain Python proxy and as methods of a ti.data_oriented class, the errors for a
misdecorated primal; ti.ad.no_grad; fields without gradients in a Tape; ti.stop_grad. Each
gradient against its analytic value, both modes."""
import numpy as np
import pytest

import tinyad as ti

N = 8


def _layout():
    x = ti.field(ti.f64)
    total = ti.field(ti.f64)
    ti.root.dense(ti.i, N).place(x)
    ti.root.place(total)
    ti.root.lazy_grad()
    x.from_numpy(np.linspace(0.5, 1.2, N))

    @ti.kernel
    def scaled_sum(mul: ti.f64):
        for i in range(N):
            ti.atomic_add(total[None], x[i] * x[i] * mul)
    return x, total, scaled_sum


def test_grad_replaced_under_a_tape_and_by_hand(mode):
    """customized_kernels_tape / _grad: the primal runs the kernel twice; the replacement
    gradient runs its adjoint once, so the gradient is half the true one. The custom-gradient
    check says so (tinyad/customcheck.py); with check=False, as the user intends it here,
    Taichi's numbers."""
    x, total, scaled_sum = _layout()

    @ti.ad.grad_replaced
    def forward(mul):
        scaled_sum(mul)
        scaled_sum(mul)

    @ti.ad.grad_for(forward)
    def backward(mul):
        scaled_sum.grad(mul)

    with pytest.raises(ti.CustomGradientRuleError, match="backward is not the derivative of "
                                                         "forward"):
        with ti.ad.Tape(loss=total):
            forward(4.0)
    ti.ad.grad_for(forward, check=False)(backward)
    with ti.ad.Tape(loss=total):
        forward(4.0)
    np.testing.assert_allclose(x.grad.to_numpy(), 4.0 * 2 * x.to_numpy())
    assert total[None] == pytest.approx(2 * 4.0 * np.sum(x.to_numpy() ** 2))

    x.grad.fill(0)
    total.grad[None] = 1.0
    forward(3.0)
    forward.grad(3.0)
    np.testing.assert_allclose(x.grad.to_numpy(), 3.0 * 2 * x.to_numpy())


def test_grad_replaced_through_a_python_proxy_and_in_a_class(mode):
    """customized_kernels_indirect, _oop, _oop2."""
    x, total, scaled_sum = _layout()

    def proxy(mul):
        scaled_sum(mul)

    @ti.ad.grad_replaced
    def forward(mul):
        proxy(mul)
        proxy(mul)

    @ti.ad.grad_for(forward, check=False)    # (half the true gradient, as Taichi's test means)
    def backward(mul):
        scaled_sum.grad(mul)

    with ti.ad.Tape(loss=total):
        forward(4.0)
    np.testing.assert_allclose(x.grad.to_numpy(), 8.0 * x.to_numpy())

    @ti.data_oriented
    class Model:
        def __init__(self):
            self.x = ti.field(ti.f64, shape=N, needs_grad=True)
            self.total = ti.field(ti.f64, shape=(), needs_grad=True)
            self.x.fill(0.5)

        @ti.kernel
        def cube_sum(self, mul: ti.f64):
            for i in range(N):
                ti.atomic_add(self.total[None], self.x[i] ** 3 * mul)

        def proxy(self, mul):
            self.cube_sum(mul)

        @ti.ad.grad_replaced
        def forward(self, mul):
            self.proxy(mul)
            self.proxy(mul)

        @ti.ad.grad_for(forward, check=False)
        def backward(self, mul):
            self.cube_sum.grad(mul)

    model = Model()
    with ti.ad.Tape(loss=model.total):
        model.forward(2.0)
    np.testing.assert_allclose(model.x.grad.to_numpy(), 2.0 * 3 * 0.25)


def test_grad_for_needs_a_grad_replaced_primal(mode):
    """decorated_primal_is_taichi_kernel, decorated_primal_missing_decorator: a RuntimeError
    when the primal is a kernel or undecorated; the kernel's own gradient still works."""
    x, total, scaled_sum = _layout()

    def undecorated(mul):
        scaled_sum(mul)

    for primal in (scaled_sum, undecorated):
        with pytest.raises(RuntimeError):
            @ti.ad.grad_for(primal)
            def backward(mul):
                scaled_sum.grad(mul)
    with ti.ad.Tape(loss=total):
        scaled_sum(4.0)
    np.testing.assert_allclose(x.grad.to_numpy(), 8.0 * x.to_numpy())


def test_no_grad_functions_are_left_out(mode):
    """customized_kernels_tape_no_grad / _grad_no_grad: a no_grad function's kernels add to
    the loss but not to the gradient; its .grad() does nothing."""
    x, total, scaled_sum = _layout()

    @ti.ad.no_grad
    def forward(mul):
        scaled_sum(mul)
        scaled_sum(mul)

    with ti.ad.Tape(loss=total):
        forward(4.0)
        scaled_sum(5.0)
    np.testing.assert_allclose(x.grad.to_numpy(), 10.0 * x.to_numpy())
    x.grad.fill(0)
    total.grad[None] = 1.0
    forward(4.0)
    forward.grad(4.0)
    assert not x.grad.to_numpy().any()


def test_a_field_without_gradient_in_a_tape(mode):
    """test_no_grad: x has no gradient; the Tape runs and the loss is right. Reading x.grad
    where none was placed is an error naming it (test_raise_no_gradient)."""
    x = ti.field(ti.f64)
    loss = ti.field(ti.f64)
    ti.root.dense(ti.i, 2).place(x)
    ti.root.place(loss, loss.grad)

    @ti.kernel
    def square_sum():
        for i in range(2):
            ti.atomic_add(loss[None], x[i] ** 2)

    x.from_numpy(np.array([1.5, 2.0]))
    with ti.ad.Tape(loss):
        square_sum()
    assert loss[None] == 6.25

    y = ti.field(ti.f64, shape=(), needs_grad=True)
    z = ti.field(ti.f64, shape=())

    @ti.kernel
    def read_grad(v: ti.template()):
        y[None] = v.grad[None] * 2

    z[None] = 5.0
    with pytest.raises(ti.TaichiCompilationError, match="z.grad"):
        read_grad(z)


def test_stop_grad_cuts_one_path(mode):
    """test_stop_grad (normal_grad, stop_grad, stop_grad2): y = x^2 (+ a stopped x^2)."""
    x = ti.field(ti.f64, shape=2, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def plain():
        for i in x:
            loss[None] += x[i] ** 2

    @ti.kernel
    def stopped():
        for i in x:
            ti.stop_grad(x)
            loss[None] += x[i] ** 2

    @ti.kernel
    def half_stopped():
        for i in x:
            loss[None] += x[i] ** 2 + ti.stop_grad(x[i]) ** 2 * x[i]

    x.from_numpy(np.array([1.0, 3.0]))
    with ti.ad.Tape(loss):
        plain()
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0, 6.0])
    with ti.ad.Tape(loss):
        stopped()
    np.testing.assert_allclose(x.grad.to_numpy(), [0.0, 0.0])
    with ti.ad.Tape(loss):
        half_stopped()
    np.testing.assert_allclose(x.grad.to_numpy(), [2.0 + 1.0, 6.0 + 9.0])


def _custom_square(mode):
    """y = x ** 2 with a hand-written gradient kernel that reads x, a loss, and a kernel that
    overwrites x."""
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    y = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def square():
        for i in range(4):
            y[i] = x[i] ** 2

    @ti.kernel
    def square_grad():
        for i in range(4):
            x.grad[i] += 2 * x[i] * y.grad[i]

    @ti.ad.grad_replaced
    def forward():
        square()

    @ti.ad.grad_for(forward)
    def backward():
        square_grad()

    @ti.kernel
    def total():
        for i in range(4):
            loss[None] += y[i]

    @ti.kernel
    def overwrite():
        for i in range(4):
            x[i] = 7.0

    x.from_numpy(np.arange(4.0))
    return x, loss, forward, total, overwrite


def test_a_custom_gradient_reading_a_value_changed_since_its_forward_is_refused(mode):
    """Taichi runs the custom gradient at x = 7 and gives 14 for every element (the forward ran
    at 0, 1, 2, 3: the true gradient is 2x): both modes refuse it, naming both lines."""
    x, loss, forward, total, overwrite = _custom_square(mode)
    with pytest.raises(ti.ReplayDivergenceRuleError) as caught:
        with ti.ad.Tape(loss):
            forward()
            total()
            overwrite()
    text = str(caught.value)
    assert "the custom gradient backward runs square_grad, which reads x[0] = 7" in text
    assert "y[i] = x[i] ** 2" in text and "x[i] = 7.0" in text


def test_a_custom_gradient_whose_inputs_change_after_the_tape_is_clean(mode, capsys):
    x, loss, forward, total, overwrite = _custom_square(mode)
    with ti.ad.Tape(loss):
        forward()
        total()
    assert np.allclose(x.grad.to_numpy(), 2 * np.arange(4.0))
    overwrite()
    assert capsys.readouterr().err == ""


def test_taichis_older_names_complex_kernel_and_ext_arr(mode):
    """PlasticineLab's simulator, in Taichi's older spellings: a @ti.complex_kernel step whose
    @ti.complex_kernel_grad recomputes its temporary, then runs the adjoints by hand, and
    ti.ext_arr() arguments. x[f + 1] = (2 x[f])^2, so d x[2] / d x[0] = 8 x[1] * 8 x[0]."""
    @ti.data_oriented
    class Simulator:
        def __init__(self, n):
            self.n = n
            self.x = ti.field(ti.f64, shape=(3, n), needs_grad=True)
            self.tmp = ti.field(ti.f64, shape=n, needs_grad=True)

        @ti.kernel
        def double(self, f: ti.i32):
            for p in range(self.n):
                self.tmp[p] = 2 * self.x[f, p]

        @ti.kernel
        def square(self, f: ti.i32):
            for p in range(self.n):
                self.x[f + 1, p] = self.tmp[p] ** 2

        @ti.complex_kernel
        def substep(self, f):
            self.double(f)
            self.square(f)

        @ti.complex_kernel_grad(substep)
        def substep_grad(self, f):
            self.double(f)        # recompute what the next step overwrote
            self.square.grad(f)
            self.double.grad(f)

        @ti.kernel
        def set_frame(self, f: ti.i32, x: ti.ext_arr()):
            for p in range(self.n):
                self.x[f, p] = x[p]

        @ti.kernel
        def read_grad(self, f: ti.i32, out: ti.any_arr()):
            for p in range(self.n):
                out[p] = self.x.grad[f, p]

    sim = Simulator(3)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def total():
        for p in range(sim.n):
            loss[None] += sim.x[2, p]

    x0 = np.array([0.5, -1.0, 2.0])
    sim.set_frame(0, x0)
    with ti.ad.Tape(loss=loss):
        sim.substep(0)
        sim.substep(1)
        total()
    grad = np.zeros(3)
    sim.read_grad(0, grad)
    x1 = (2 * x0) ** 2
    np.testing.assert_allclose(grad, 8 * x1 * 8 * x0, rtol=1e-12)


def test_a_gradient_kernel_written_by_hand_stands_for_an_adjoint(mode):
    """PlasticineLab's step: a grad_for that clears its scratch gradients (through a local
    `zero`), recomputes, and runs its own svd_grad kernel where svd.grad() would go. Neither
    is a fault: what the clear discards was used by then, and the hand-written kernel gives
    the gradient the later .grad() needs. x[f + 1] = (2 x[f])^3 + x[f], so
    d x[2] / d x[0] = (24 x[1]^2 + 1) (24 x[0]^2 + 1)."""
    n = 3
    x = ti.field(ti.f64, shape=(3, n), needs_grad=True)
    tmp = ti.field(ti.f64, shape=n, needs_grad=True)
    cube = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def double(f: ti.i32):
        for p in range(n):
            tmp[p] = 2 * x[f, p]

    @ti.kernel
    def cube_it():                 # its adjoint is cube_grad, written by hand
        for p in range(n):
            cube[p] = tmp[p] ** 3

    @ti.kernel
    def cube_grad():
        for p in range(n):
            tmp.grad[p] += 3 * tmp[p] ** 2 * cube.grad[p]

    @ti.kernel
    def advance(f: ti.i32):
        for p in range(n):
            x[f + 1, p] = cube[p] + x[f, p]

    @ti.kernel
    def clear_scratch_grad():
        zero = 0.0
        for p in range(n):
            tmp.grad[p] = zero
            cube.grad[p] = zero

    @ti.ad.grad_replaced
    def step(f):
        double(f)
        cube_it()
        advance(f)

    @ti.ad.grad_for(step)
    def step_grad(f):
        clear_scratch_grad()
        double(f)
        cube_it()
        advance.grad(f)
        cube_grad()
        double.grad(f)

    @ti.kernel
    def total():
        for p in range(n):
            loss[None] += x[2, p]

    x0 = np.array([0.25, -0.5, 0.75])
    x.from_numpy(np.stack([x0, np.zeros(n), np.zeros(n)]))
    with ti.ad.Tape(loss=loss):
        step(0)
        step(1)
        total()
    x1 = 8 * x0 ** 3 + x0
    np.testing.assert_allclose(x.grad.to_numpy()[0], (24 * x1 ** 2 + 1) * (24 * x0 ** 2 + 1),
                               rtol=1e-12)

    @ti.ad.grad_replaced
    def step_again(f):
        step(f)

    norm = ti.field(ti.f64, shape=())

    @ti.kernel
    def peek():                    # reads cube.grad, uses none of it for a gradient
        for p in range(n):
            norm[None] += cube.grad[p] ** 2

    @ti.ad.grad_for(step_again)
    def step_again_grad(f):        # the clear comes after advance.grad() adds to cube.grad
        double(f)
        cube_it()
        advance.grad(f)
        peek()
        clear_scratch_grad()
        cube_grad()
        double.grad(f)

    x.from_numpy(np.stack([x0, np.zeros(n), np.zeros(n)]))
    with pytest.raises(ti.SilentZeroRuleError, match="Custom gradient assigns") as info:
        with ti.ad.Tape(loss=loss):
            step_again(0)
            step_again(1)
            total()
    assert "cube.grad" in info.value.report.summary
