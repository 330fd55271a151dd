"""Places where tinyad once gave a value that differs from Python's or Taichi's: tuple assignment,
the derivative of abs at 0, and the user's global random generators."""
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tinyad as ti


def test_tuple_assignment_evaluates_every_right_hand_side_first(mode):
    out = ti.field(ti.i32, shape=4)
    cells = ti.field(ti.i32, shape=2)

    @ti.kernel
    def swap_and_step():
        p, q = 1, 2
        p, q = q, p                 # a swap: (2, 1), not (2, 2)
        out[0], out[1] = p, q
        a, b = 0, 1
        for _ in range(10):
            a, b = b, a + b         # Fibonacci: the tenth number, 55
        out[2] = a
        cells[0], cells[1] = cells[1], cells[0]   # field elements swap the same way
        out[3] = cells[0] * 10 + cells[1]

    cells[0], cells[1] = 3, 4
    swap_and_step()
    assert out.to_numpy().tolist() == [2, 1, 55, 43]


def test_gradient_through_tuple_assignment(mode):
    # p, q = q, p * x + q: after n steps q is a polynomial in x; compare with its derivative.
    x = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def recurrence():
        p, q = 1.0, x[None]
        for _ in range(4):
            p, q = q, p * x[None] + q
        loss[None] = q

    def recurrence_py(v):
        p, q = 1.0, v
        for _ in range(4):
            p, q = q, p * v + q
        return q

    x[None] = 0.7
    with ti.ad.Tape(loss):
        recurrence()
    h = 1e-6
    central = (recurrence_py(0.7 + h) - recurrence_py(0.7 - h)) / (2 * h)
    assert loss[None] == pytest.approx(recurrence_py(0.7), rel=1e-12)
    assert x.grad[None] == pytest.approx(central, rel=1e-7)


def test_abs_derivative_is_sign_with_zero_at_zero(mode):
    x = ti.field(ti.f64, shape=3, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def total():
        for i in x:
            loss[None] += ti.abs(x[i])

    x.from_numpy(np.array([-1.5, 0.0, 2.0]))
    with ti.ad.Tape(loss):
        total()
    assert x.grad.to_numpy().tolist() == list(np.sign([-1.5, 0.0, 2.0]))


_DRAWS_AFTER_A_LAUNCH = textwrap.dedent("""
    import random, sys
    import numpy as np
    random.seed(1234)
    np.random.seed(1234)
    if sys.argv[1] != "none":
        import tinyad as ti
        ti.init(mode=sys.argv[1])
        x = ti.field(ti.f32, shape=4, needs_grad=True)
        loss = ti.field(ti.f32, shape=(), needs_grad=True)

        @ti.kernel
        def noise():
            for i in x:
                x[i] = ti.random()

        @ti.kernel
        def total():
            for i in x:
                loss[None] += x[i] * x[i]

        noise()
        with ti.ad.Tape(loss):
            total()
    print(random.random(), np.random.rand())
""")


def test_tinyad_leaves_the_global_random_generators_alone(mode, tmp_path):
    # A fresh process: whatever tinyad imports the first time it runs a kernel, the user's
    # seeded sequences of `random` and `numpy.random` go on as they would without tinyad.
    program = tmp_path / "draws.py"      # a file: tinyad reads kernels' source from it
    program.write_text(_DRAWS_AFTER_A_LAUNCH)

    def draws(arg):
        result = subprocess.run([sys.executable, str(program), arg],
                                capture_output=True, text=True, check=True)
        return result.stdout.split()

    assert draws(mode) == draws("none")


def test_no_draws_in_this_process(mode):
    # The same in-process, for the generators' state around a launch of a checked kernel.
    x = ti.field(ti.f32, shape=2)

    @ti.kernel
    def fill():
        for i in x:
            x[i] = ti.random()

    random.seed(7)
    np.random.seed(7)
    python_state, numpy_state = random.getstate(), np.random.get_state()
    fill()
    assert random.getstate() == python_state
    assert np.array_equal(np.random.get_state()[1], numpy_state[1])
