"""Every code example of the seed documents (Taichi's autodiff docs, seeds 000 and 001, and the
reverse-mode examples of seed 002), run with `import tinyad as ti`, GUI lines left out. Each
asserts the gradient the document states, which is also the analytic truth."""
import math

import numpy as np
import pytest

import tinyad as ti


def test_seed000_tape_with_old_var_spelling(mode):
    x = ti.var(ti.f32, (), needs_grad=True)
    y = ti.var(ti.f32, (), needs_grad=True)

    @ti.kernel
    def compute_y():
        y[None] = ti.sin(x[None])

    x[None] = 0.7
    with ti.Tape(y):
        compute_y()
    assert x.grad[None] == pytest.approx(math.cos(0.7), rel=1e-6)


def test_seed000_handwritten_derivative_kernel(mode):
    x = ti.var(ti.f32, ())
    dy_dx = ti.var(ti.f32, ())

    @ti.kernel
    def compute_dy_dx():
        dy_dx[None] = ti.cos(x[None])

    x[None] = 0.3
    compute_dy_dx()
    assert dy_dx[None] == pytest.approx(math.cos(0.3), rel=1e-6)


def _gravity_energy(x):
    d = x[:, None, :] - x[None, :, :]
    return np.sum(-1 / np.sqrt((d ** 2).sum(-1) + 1e-3))


@pytest.mark.parametrize("old_spelling", [True, False])
def test_seed000_and_001_gravity(mode, old_spelling):
    N, dt = 8, 1e-5
    if old_spelling:
        x = ti.Vector.var(2, ti.f32, N, needs_grad=True)
        v = ti.Vector.var(2, ti.f32, N)
        U = ti.var(ti.f32, (), needs_grad=True)
    else:
        x = ti.Vector.field(2, dtype=ti.f32, shape=N, needs_grad=True)
        v = ti.Vector.field(2, dtype=ti.f32, shape=N)
        U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(N, N):
            r = x[i] - x[j]
            # r.norm(1e-3) is equivalent to ti.sqrt(r.norm()**2 + 1e-3)
            U[None] += -1 / r.norm(1e-3)

    @ti.kernel
    def advance():
        for i in x:
            v[i] += dt * -x.grad[i]
        for i in x:
            x[i] += dt * v[i]

    def substep():
        with ti.Tape(loss=U):
            compute_U()
        advance()

    @ti.kernel
    def init():
        for i in x:
            x[i] = [ti.random(), ti.random()]

    init()
    for _ in range(5):
        substep()
    positions = x.to_numpy().astype(np.float64)
    assert U[None] == pytest.approx(_gravity_energy(positions), rel=1e-4)
    # the force the tape computed (at the positions before the last advance) vs central FD
    with ti.Tape(loss=U):
        compute_U()
    grad = x.grad.to_numpy()
    eps = 1e-5
    for i in range(N):
        for c in range(2):
            plus, minus = positions.copy(), positions.copy()
            plus[i, c] += eps
            minus[i, c] -= eps
            fd = (_gravity_energy(plus) - _gravity_energy(minus)) / (2 * eps)
            assert grad[i, c] == pytest.approx(fd, rel=2e-3, abs=1e-3)


def test_seed001_kernel_grad_with_two_losses(mode):
    N = 16
    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    loss2 = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func():
        for i in x:
            loss[None] += x[i] ** 2
            loss2[None] += x[i]

    for i in range(N):
        x[i] = i
    loss.grad[None] = 1
    loss2.grad[None] = 1
    func()
    func.grad()
    for i in range(N):
        assert x.grad[i] == i * 2 + 1


def test_seed001_lazy_grad_places_gradients(mode):
    x = ti.field(ti.f32, shape=4)
    loss = ti.field(ti.f32, shape=())
    ti.root.lazy_grad()

    @ti.kernel
    def f():
        for i in x:
            loss[None] += 3 * x[i]

    with ti.ad.Tape(loss=loss):
        f()
    assert x.grad.to_numpy().tolist() == [3, 3, 3, 3]


def test_seed001_func_broke_rule_1(mode):
    """The document's bad example: tinyad stops it at the overwrite, naming both lines."""
    N = 16
    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)
    b = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func_broke_rule_1():
        loss[None] = x[1] * b[None]
        b[None] += 100

    for i in range(N):
        x[i] = i
    b[None] = 10
    loss.grad[None] = 1
    with pytest.raises(ti.AutodiffRuleError) as info:
        with ti.Tape(loss):
            func_broke_rule_1()
    report = info.value.report
    assert report.rule == "Global Data Access Rule 1" and report.element_text == "b[]"
    assert report.read.loc.text.strip() == "loss[None] = x[1] * b[None]"
    assert report.write.loc.text.strip() == "b[None] += 100"
    assert (report.read.value, report.write.value) == (10, 110)


def test_seed001_func_equivalent_rule_1(mode):
    N = 16
    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func_equivalent():
        loss[None] = x[1] * 10

    for i in range(N):
        x[i] = i
    with ti.Tape(loss):
        func_equivalent()
    assert x.grad[1] == 10.0


def test_seed001_func_break_rule_2(mode):
    """The document's second bad example: caught when its gradient is asked for."""
    N = 16
    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func_break_rule_2():
        loss[None] += x[1] ** 2
        loss[None] *= x[2]

    for i in range(N):
        x[i] = i
    loss.grad[None] = 1
    loss[None] = 2
    func_break_rule_2()
    with pytest.raises(ti.AutodiffRuleError) as info:
        func_break_rule_2.grad()
    report = info.value.report
    assert report.rule == "Global Data Access Rule 2" and report.element_text == "loss[]"
    assert report.earlier[0].loc.text.strip() == "loss[None] += x[1] ** 2"
    assert report.read.loc.text.strip() == report.write.loc.text.strip() == "loss[None] *= x[2]"


def test_seed001_func_equivalent_rule_2(mode):
    N = 16
    x = ti.field(dtype=ti.f32, shape=N, needs_grad=True)
    loss = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def func_equivalent():
        loss[None] = (2 + x[1] ** 2) * x[2]

    for i in range(N):
        x[i] = i
    loss.grad[None] = 1
    func_equivalent()
    func_equivalent.grad()
    assert x.grad[1] == 4.0
    assert x.grad[2] == 3.0


def test_seed001_kernel_simplicity_examples(mode):
    x = ti.field(ti.f32, shape=10, needs_grad=True)
    y = ti.field(ti.f32, shape=10, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def differentiable_task1():
        for i in x:
            x[i] = y[i]

    @ti.kernel
    def differentiable_task2():
        for i in range(10):
            for j in range(20):
                for k in range(3):
                    loss[None] += x[i] * (j + k)

    @ti.kernel
    def differentiable_task3():  # the doc's fix: ti.static unrolls the inner loops
        for i in range(10):
            for j in ti.static(range(2)):
                loss[None] += x[i] * j
            for j in ti.static(range(3)):
                loss[None] += x[i] * x[i] * j

    @ti.kernel
    def differentiable_task4():  # tinyad also differentiates the mixed form Taichi rejects
        loss[None] += x[0]
        for i in range(10):
            loss[None] += 2 * x[i]

    y.from_numpy(np.arange(10, dtype=np.float32))
    with ti.ad.Tape(loss=loss):
        differentiable_task1()
        differentiable_task2()
        differentiable_task3()
        differentiable_task4()
    xs = np.arange(10)
    expected_x = sum(j + k for j in range(20) for k in range(3)) + 1 + 2 * xs * 3 + 2
    expected_x[0] += 1
    # task1's store `x[i] = y[i]` hands x's gradient on to y: the old x no longer matters
    assert np.allclose(y.grad.to_numpy(), expected_x)
    assert np.allclose(x.grad.to_numpy(), 0)


def test_seed001_customized_gradient(mode):
    x = ti.field(ti.f32)
    total = ti.field(ti.f32)
    n = 128
    ti.root.dense(ti.i, n).place(x)
    ti.root.place(total)
    ti.root.lazy_grad()

    @ti.kernel
    def func(mul: ti.f32):
        for i in range(n):
            ti.atomic_add(total[None], x[i] * mul)

    @ti.ad.grad_replaced
    def forward(mul):
        func(mul)
        func(mul)

    @ti.ad.grad_for(forward)
    def backward(mul):
        func.grad(mul)

    # The docs' custom gradient is half the true one: tinyad's check of custom gradients says
    # so; check=False runs it as Taichi does.
    with pytest.raises(ti.CustomGradientRuleError, match="not the derivative of forward"):
        with ti.ad.Tape(loss=total):
            forward(4)
    ti.ad.grad_for(forward, check=False)(backward)
    with ti.ad.Tape(loss=total):
        forward(4)
    assert x.grad[0] == 4


def test_seed002_dfdx_by_kernel_grad(mode):
    x = ti.field(float, shape=(), needs_grad=True)
    y = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        y[None] += x[None] ** 3 + 2 * x[None] ** 2 - 3 * x[None] + 1

    def dfdx(_x):
        x[None] = _x
        y.grad[None] = 1.0
        f.grad()
        return x.grad[None]

    assert dfdx(1.0) == pytest.approx(4.0)


def test_seed002_backward_helper(mode):
    x1 = ti.field(float, shape=(), needs_grad=True)
    x2 = ti.field(float, shape=(), needs_grad=True)
    x3 = ti.field(float, shape=(), needs_grad=True)
    y = ti.field(float, shape=(), needs_grad=True)

    @ti.kernel
    def f():
        y[None] += x1[None] ** 3 + 2 * x2[None] ** 2 - 3 * x3[None] + 1

    def backward(f, input_field, out_field):
        out_field.grad[None] = 1.0

        def _dfdx(inputs):
            for i, x in enumerate(inputs):
                input_field[i].from_numpy(np.array(inputs[i]))
            f.grad()
            return [x.grad.to_numpy() for x in input_field]
        return _dfdx

    dfdx = backward(f, [x1, x2, x3], y)
    assert [float(g) for g in dfdx([1.0, 2.0, 3.0])] == [3, 8, -3]
