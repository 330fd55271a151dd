"""ti.capture: a function's launches, Tapes and fills recorded once and replayed as one program.

Each test runs in both modes. Fast mode replays a captured program (checked ones: see
tests/test_capture_checked.py); interp mode runs the function as plain Python every call, so in
every mode the captured function must give what the plain one gives, and its gradients the
analytic truth.
"""
import numpy as np
import pytest

import tinyad as ti
from tinyad.sequence import Fill, Launch, Loop, roll, unrolled

EPS = 1e-3


@pytest.fixture
def unchecked(mode, monkeypatch):
    """`mode` without rule checks (where fast mode replays captured programs), in f64. Captured
    programs compile at once, not beside the program (compile/ahead.py), so that which call
    replays is certain."""
    monkeypatch.setenv("TINYAD_COMPILE_AHEAD", "0")
    ti.init(mode=mode, check="off", default_fp=ti.f64)
    return mode


def _gravity(n=6):
    x = ti.Vector.field(2, dtype=ti.f64, shape=n, needs_grad=True)
    v = ti.Vector.field(2, dtype=ti.f64, shape=n)
    U = ti.field(dtype=ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(n, n):
            r = x[i] - x[j]
            U[None] += -1 / ti.sqrt(r.dot(r) + EPS)

    @ti.kernel
    def advance(dt: ti.f64):
        for i in x:
            v[i] -= dt * x.grad[i]
            x[i] += dt * v[i]

    def steps(count, dt=1e-3):
        for _ in range(count):
            with ti.ad.Tape(loss=U):
                compute_U()
            advance(dt)

    x0 = np.random.default_rng(1).random((n, 2))

    def reset():
        x.from_numpy(x0)
        v.fill(0)
    return x, v, U, steps, reset, x0


def _analytic_grad(x):
    """dU/dx for U = sum_ij -1/sqrt(|x_i - x_j|^2 + eps): each pair counted twice."""
    d = x[:, None, :] - x[None, :, :]
    r2 = (d ** 2).sum(-1) + EPS
    return (2 * d / r2[..., None] ** 1.5).sum(1)


def test_a_captured_time_loop_gives_the_plain_values_and_true_gradients(unchecked):
    x, v, _, steps, reset, x0 = _gravity()
    captured = ti.capture(steps)
    reset()
    steps(5)
    expected = x.to_numpy(), v.to_numpy()
    for _ in range(3):                     # captured, then replayed twice
        reset()
        captured(5)
        np.testing.assert_array_equal(x.to_numpy(), expected[0])
        np.testing.assert_array_equal(v.to_numpy(), expected[1])
    assert captured.replays == (2 if unchecked == "fast" else 0)
    for _ in range(2):                     # a new argument: captured anew, then replayed
        reset()
        captured(1)
        np.testing.assert_allclose(x.grad.to_numpy(), _analytic_grad(x0), rtol=1e-10)
    assert captured.replays == (3 if unchecked == "fast" else 0)


def test_the_program_rolls_the_time_loop_and_prints(unchecked):
    *_, steps, reset, _ = _gravity()
    captured = ti.capture(steps)
    reset()
    text = captured.program(100)
    if unchecked == "fast":
        assert "700 events as 8 lines" in text
        assert "loop 100 times" in text and "launch compute_U (adjoint)" in text
    else:
        assert "runs as plain Python" in text


def _launch(name, *scalars):
    class Traced:          # what a Launch names: a traced kernel with an IR name
        pass
    traced = Traced()
    traced.ir = type("IR", (), {"name": name})()
    return traced, scalars


def test_rolling_finds_affine_steps_and_unrolls_to_the_same_events():
    a, _ = _launch("a")
    b, _ = _launch("b")
    fld = type("F", (), {"name": "f"})()
    forward = [Launch(a, "primal", (t,)) for t in range(10)]
    backward = [ev for t in reversed(range(10))
                for ev in (Launch(b, "adjoint", (t, 0.5)), Fill(fld, 0.0))]
    drifting = [Launch(a, "primal", (0.1 * t,)) for t in range(6)]   # not exactly affine
    events = [Fill(fld, 0.0), *forward, *backward, *drifting]
    program = roll(events)
    assert unrolled(program) == events
    loops = [item for item in program if isinstance(item, Loop)]
    assert (loops[0].count, loops[0].deltas) == (10, ((1,),))
    assert (loops[1].count, loops[1].deltas) == (10, ((-1, 0.0), ()))
    rng = np.random.default_rng(0)
    for _ in range(50):                    # any sequence: rolled, then unrolled, is itself
        events = [Launch(a if rng.random() < 0.5 else b, "primal", (int(rng.integers(3)),))
                  for _ in range(int(rng.integers(1, 40)))]
        assert unrolled(roll(events)) == events


def test_a_checked_call_that_reports_is_never_replayed(mode):
    ti.init(mode=mode, default_fp=ti.f64)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    y = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def read_then_overwrite():
        for i in x:
            loss[None] += x[i] * y[i]
        for i in x:
            x[i] = 0.0

    def step():
        with ti.ad.Tape(loss=loss):
            read_then_overwrite()

    captured = ti.capture(step)
    for run in (step, captured, captured):
        x.fill(1.0)
        with pytest.raises(ti.ReadThenOverwriteRuleError) as caught:
            run()
        assert "x[i] = 0.0" in str(caught.value)
    assert captured.replays == 0


def test_python_reads_and_loads_inside_are_refused_at_their_line(unchecked):
    x = ti.field(ti.f64, shape=3, needs_grad=True)

    @ti.kernel
    def double():
        for i in x:
            x[i] *= 2

    @ti.kernel
    def total() -> ti.f64:
        s = 0.0
        for i in x:
            s += x[i]
        return s

    def reads():
        double()
        print(x[0])                                       # the line named

    def loads():
        x.from_numpy(np.ones(3))                          # the line named

    def returns():
        total()                                           # the line named

    def draws():
        double()
        ti.random()                                       # the line named

    for fn, words in ((reads, "reads x"), (loads, "loads values into x"),
                      (returns, "uses the value total returns"),
                      (draws, "draws a random number")):
        with pytest.raises(ti.TinyadRuntimeError) as caught:
            ti.capture(fn)()
        assert words in str(caught.value)
        assert "# the line named" in str(caught.value)


SCALE = 2.0
EXTRA = [1.0]


def test_a_changed_global_and_python_writes_between_calls_are_seen(unchecked):
    global SCALE
    x = ti.field(ti.f64, shape=3)

    @ti.kernel
    def scale(s: ti.f64):
        for i in x:
            x[i] *= s

    @ti.capture
    def step():
        scale(SCALE)
        for factor in EXTRA:
            scale(factor)
        x[2] = 7.0

    x.fill(1.0)
    step()
    step()
    np.testing.assert_array_equal(x.to_numpy(), [4.0, 4.0, 7.0])
    SCALE = 3.0
    try:
        x[0] = 10.0                        # a Python write between calls
        step()
        np.testing.assert_array_equal(x.to_numpy(), [30.0, 12.0, 7.0])
        EXTRA.append(0.5)                  # a global list changed in place
        step()
        np.testing.assert_array_equal(x.to_numpy(), [45.0, 18.0, 7.0])
    finally:
        SCALE = 2.0
        EXTRA[:] = [1.0]
    ti.init(mode=unchecked, check="off", default_fp=ti.f64)    # fields from before are gone
    with pytest.raises(ti.TinyadRuntimeError, match="created before the last ti.init"):
        step()


def test_random_kernels_replay_the_stream_the_plain_calls_draw(unchecked):
    def program():
        x = ti.field(ti.f64, shape=8)

        @ti.kernel
        def noise(k: ti.i32):
            for i in x:
                x[i] += ti.random() * k

        def step():
            for k in range(3):
                noise(k)
        return x, step

    ti.init(mode=unchecked, check="off", default_fp=ti.f64, random_seed=7)
    x, step = program()
    for _ in range(3):
        step()
    expected = x.to_numpy()
    ti.init(mode=unchecked, check="off", default_fp=ti.f64, random_seed=7)
    x, step = program()
    captured = ti.capture(step)
    for _ in range(3):
        captured()
    np.testing.assert_array_equal(x.to_numpy(), expected)


def test_a_bad_index_in_a_replay_names_the_kernel_line(unchecked):
    x = ti.field(ti.f64, shape=4)
    where = ti.field(ti.i32, shape=4)

    @ti.kernel
    def gather():
        for i in x:
            x[where[i]] += 1.0                            # the bad access

    captured = ti.capture(gather)
    captured()
    captured()
    where[3] = 9
    with pytest.raises(ti.TinyadIndexError) as caught:
        captured()
    assert "x[where[i]] += 1.0" in str(caught.value)


def test_fills_and_element_writes_inside_a_tape_and_threaded_kernels(unchecked):
    """mass_spring's shape: fills inside the Tape, a time loop forward and back, and a loop
    long enough for threads (fast mode replays it in Python)."""
    n, steps = 4096, 4
    x = ti.field(ti.f64, shape=(steps + 1, n), needs_grad=True)
    w = ti.field(ti.f64, shape=(), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(n):
            x[t + 1, i] = x[t, i] * w[None] + ti.sin(x[t, i])

    @ti.kernel
    def measure():
        for i in range(n):
            loss[None] += x[steps, i] ** 2 / n

    def run():
        with ti.ad.Tape(loss=loss):
            loss.fill(0)
            for t in range(steps):
                advance(t)
            measure()

    x0 = np.linspace(0, 1, n)

    def value_and_grad(fn, weight):
        x.fill(0)
        x_start = x.to_numpy()
        x_start[0] = x0
        x.from_numpy(x_start)
        w[None] = weight
        fn()
        return loss[None], w.grad[None]

    captured = ti.capture(run)
    for _ in range(3):
        assert value_and_grad(captured, 0.9) == value_and_grad(run, 0.9)
    h = 1e-6
    central = (value_and_grad(run, 0.9 + h)[0] - value_and_grad(run, 0.9 - h)[0]) / (2 * h)
    assert value_and_grad(captured, 0.9)[1] == pytest.approx(central, rel=1e-6)


def test_a_program_compiling_beside_the_calls_replays_once_ready(mode):
    """By default a captured program compiles in compile/ahead.py's helper process: calls
    meanwhile run as plain Python, with the same values; once ready, they replay."""
    ti.init(mode=mode, check="off", default_fp=ti.f64)
    x, _, _, steps, reset, _ = _gravity()
    captured = ti.capture(steps)
    reset()
    steps(3)
    expected = x.to_numpy()
    reset()
    captured(3)
    reset()
    captured(3)                            # a replay, or plain while the program compiles
    np.testing.assert_array_equal(x.to_numpy(), expected)
    captured.wait()
    replays = captured.replays
    reset()
    captured(3)
    np.testing.assert_array_equal(x.to_numpy(), expected)
    assert captured.replays == replays + (mode == "fast")
