"""The autodiff API around the transform: Tape options, kernel.grad accumulation, no_grad,
stop_grad, clear_all_gradients, custom gradients, and what the adjoint IR looks like."""
import numpy as np
import pytest

import tinyad as ti


@pytest.fixture
def square_sum(mode):
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            loss[None] += x[i] * x[i]

    x.from_numpy(np.array([1.0, 2.0, 3.0]))
    return x, loss, k


def test_kernel_grad_accumulates_and_clear_all_gradients_resets(square_sum):
    x, loss, k = square_sum
    loss.grad[None] = 1
    k()
    k.grad()
    k.grad()
    assert x.grad.to_numpy().tolist() == [4.0, 8.0, 12.0]   # two rounds add up, as in Taichi
    ti.ad.clear_all_gradients()
    assert x.grad.to_numpy().tolist() == [0.0, 0.0, 0.0] and loss.grad[None] == 0


def test_tape_clears_gradients_unless_told_not_to(square_sum):
    x, loss, k = square_sum
    with ti.ad.Tape(loss=loss):
        k()
    with ti.ad.Tape(loss=loss, clear_gradients=False):
        k()
    assert x.grad.to_numpy().tolist() == [4.0, 8.0, 12.0]
    with ti.ad.Tape(loss=loss):
        k()
    assert x.grad.to_numpy().tolist() == [2.0, 4.0, 6.0]
    assert loss[None] == 14.0   # the Tape zeroes the loss on entry


def test_tape_clears_gradients_given_after_an_earlier_tape(square_sum):
    """A Tape clears every placed gradient on entry, those given since the last Tape too (a
    new field's, lazy_grad's): what it clears is kept between Tapes only while the layout
    stays as it was (tinyad/twins.py)."""
    x, loss, k = square_sum
    y = ti.field(ti.f64, shape=2)
    with ti.ad.Tape(loss=loss):
        k()
    z = ti.field(ti.f64, shape=2, needs_grad=True)
    ti.root.lazy_grad()          # y gets its gradient now
    y.grad.fill(5.0)
    z.grad.fill(5.0)
    with ti.ad.Tape(loss=loss):
        k()
    assert y.grad.to_numpy().tolist() == [0.0, 0.0]
    assert z.grad.to_numpy().tolist() == [0.0, 0.0]
    assert x.grad.to_numpy().tolist() == [2.0, 4.0, 6.0]


def test_no_grad_kernel_is_skipped_by_the_tape(square_sum):
    x, loss, k = square_sum

    @ti.ad.no_grad
    @ti.kernel
    def double_loss():
        loss[None] += loss[None]   # would double every gradient if differentiated

    with ti.ad.Tape(loss=loss):
        k()
        double_loss()
    assert loss[None] == 28.0
    assert x.grad.to_numpy().tolist() == [2.0, 4.0, 6.0]


def test_stop_grad_on_a_field_and_on_a_value(mode):
    x = ti.field(ti.f64, shape=2, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        ti.stop_grad(x)
        loss[None] += x[0] * 3

    @ti.kernel
    def j():
        loss[None] += ti.stop_grad(x[1] * x[1]) * x[1]

    x.from_numpy(np.array([2.0, 5.0]))
    with ti.ad.Tape(loss=loss):
        k()
        j()
    assert x.grad.to_numpy().tolist() == [0.0, 25.0]


def test_custom_gradient_replaces_the_kernels_gradient(mode):
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def cube_sum():
        for i in x:
            loss[None] += x[i] ** 3

    @ti.kernel
    def handwritten_cube_grad():
        for i in x:
            x.grad[i] += 3 * x[i] ** 2 * loss.grad[None]

    @ti.ad.grad_replaced
    def forward():
        cube_sum()

    @ti.ad.grad_for(forward)
    def backward():
        handwritten_cube_grad()

    x.from_numpy(np.array([1.0, -2.0, 0.5]))
    with ti.ad.Tape(loss=loss):
        forward()
    assert x.grad.to_numpy().tolist() == [3.0, 12.0, 0.75]
    with pytest.raises(TypeError, match="python"):
        ti.ad.grad_replaced(cube_sum)
    with pytest.raises(RuntimeError, match="grad_replaced"):   # Taichi's class
        ti.ad.grad_for(lambda: None)


def test_atomic_max_gives_the_gradient_to_the_winner(mode):
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def k():
        for i in x:
            ti.atomic_max(loss[None], 2 * x[i])

    x.from_numpy(np.array([1.0, 4.0, 3.0, 2.0]))
    with ti.ad.Tape(loss=loss):
        k()
    assert loss[None] == 8.0
    assert x.grad.to_numpy().tolist() == [0.0, 2.0, 0.0, 0.0]   # Taichi gives [2, 2, 2, 2]


@pytest.mark.parametrize("lanes", ["1", "0"])   # interp: numpy lanes, and the scalar path
def test_tied_atomic_max_winners_take_the_gradient_once(mode, lanes, monkeypatch):
    """Tied winners (in one launch and across two) share one gradient: exactly one of them takes
    it, and it is the derivative of the loss when all of them move together (central
    differences). The lanes once gave it to every tied lane of a launch (DiffTaichi's diff_sph:
    interp's gradient 5 times fast mode's)."""
    monkeypatch.setenv("TINYAD_INTERP_LANES", lanes)
    n = 40
    x = ti.field(ti.f64, shape=(2, n), needs_grad=True)
    top = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def running_max(t: ti.i32):
        for i in range(n):
            ti.atomic_max(top[None], x[t, i] * x[t, i])

    @ti.kernel
    def finish():
        loss[None] = 3.0 * top[None]

    values = np.linspace(0.1, 0.9, 2 * n).reshape(2, n)
    tied = [(0, 3), (0, 17), (1, 5), (1, 30), (1, 31)]
    for t, i in tied:
        values[t, i] = 1.5
    x.from_numpy(values)

    def loss_of():
        top[None] = 0.0
        running_max(0)
        running_max(1)
        finish()
        return loss[None]

    with ti.ad.Tape(loss=loss):
        loss_of()
    grad = x.grad.to_numpy()
    taken = [grad[t, i] for t, i in tied]
    assert sorted(taken)[:-1] == [0.0] * (len(tied) - 1)      # one winner among the tied
    assert np.count_nonzero(grad) == 1                        # and nothing else
    h = 1e-6
    x.from_numpy(values + h * _indicator(values.shape, tied))
    up = loss_of()
    x.from_numpy(values - h * _indicator(values.shape, tied))
    down = loss_of()
    assert sum(taken) == pytest.approx((up - down) / (2 * h), rel=1e-8)   # 2 * 1.5 * 3 = 9


def _indicator(shape, places):
    out = np.zeros(shape)
    for p in places:
        out[p] = 1.0
    return out


def test_adjoint_ir_prints_replay_then_reversed_adjoints(mode):
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    y = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute_y():
        a = ti.sin(x[None])
        y[None] = a * a

    text = str(compute_y.grad.ir)
    assert text.splitlines()[0] == "kernel compute_y_grad():"
    lines = [line.split("#")[0].strip() for line in text.splitlines()[1:]]
    assert lines[0] == "a: f64 = sin(x[])"                    # replay
    assert lines.index("y.grad[] = 0.0") < lines.index("x.grad[] += g_1 * cos(x[])")
    assert "test_autodiff_api.py" in text                     # lines point at the source


def test_tape_validation_is_never_silently_ignored(mode):
    """Taichi's Tape(validation=True) asks for rule checks: tinyad says what this run does."""
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def square():
        loss[None] = x[None] ** 2

    x[None] = 3.0
    with pytest.warns(UserWarning, match="validation=True") as caught:
        with ti.ad.Tape(loss, validation=True):
            square()
    assert "already checks" in str(caught[0].message)     # both modes check by default
    assert x.grad[None] == pytest.approx(6.0)
    ti.init(mode=mode, check="off", default_fp=ti.f64)
    y = ti.field(ti.f64, shape=(), needs_grad=True)
    with pytest.warns(UserWarning, match="this run checks no autodiff rules"):
        with ti.ad.Tape(y, validation=True):
            pass
