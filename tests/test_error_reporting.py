"""How errors reach the user, beyond the corpus of mistakes (tests/test_mistakes.py): tinyad's own
bugs are reported as such, Ctrl-C and closed pipes end quietly, ti.random() gives one stream in
every mode, and reports name the kernel line they mean."""
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

import tinyad as ti
from tinyad.core import builder
from tinyad.kernel import Kernel

ROOT = Path(__file__).resolve().parent.parent


# ---- an exception from tinyad's own code is a bug in tinyad, not the user's mistake --------------

def _failing(exc):
    """A function that raises `exc` as if from tinyad's own code (its module's globals), the way
    a bug in tinyad would."""
    def fail(*args, **kwargs):
        raise exc
    return types.FunctionType(fail.__code__, vars(builder), "fail", None, fail.__closure__)


def test_an_internal_failure_while_tracing_is_reported_as_a_bug_at_the_users_line(
        mode, monkeypatch):
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def double():
        for i in x:
            x[i] = x[i] * 2.0
    line = double.fn.__code__.co_firstlineno + 3       # the `x[i] = ...` line

    monkeypatch.setattr(builder, "binary", _failing(AttributeError("'float' has no 'is_float'")))
    with pytest.raises(ti.TinyadInternalError) as info:
        double()
    text = str(info.value)
    assert text.startswith("internal error in tinyad (this is a bug in tinyad, please report it)")
    assert not isinstance(info.value, ti.TinyadTypeError)       # not dressed as a user error
    assert (info.value.loc.file, info.value.loc.line) == (__file__, line)
    assert isinstance(info.value.__cause__, AttributeError)      # kept for the bug report


def test_an_internal_failure_while_launching_names_the_users_call(mode, monkeypatch):
    x = ti.field(ti.f32, shape=4)

    @ti.kernel
    def fill():
        for i in x:
            x[i] = 1.0

    monkeypatch.setattr(Kernel, "_launch", _failing(KeyError("storage")))
    with pytest.raises(ti.TinyadInternalError, match="this is a bug in tinyad") as info:
        fill()  # <- the line the report names
    assert info.value.loc.text.strip() == "fill()  # <- the line the report names"
    assert isinstance(info.value.__cause__, KeyError)


def test_the_users_own_helper_failing_at_trace_time_is_the_users_error(mode):
    x = ti.field(ti.f32, shape=4)

    def weight(k):
        return {"a": 1.0}[k]

    @ti.kernel
    def k():
        x[0] = weight("b")

    with pytest.raises(ti.TinyadTypeError, match="weight\\(\\) raised KeyError") as info:
        k()
    assert not isinstance(info.value, ti.TinyadInternalError)


# ---- small things a new user meets first ---------------------------------------------------------

def test_randn_is_a_standard_normal_draw_alike_in_both_modes():
    def draw(mode):
        ti.init(mode=mode, random_seed=3)
        x = ti.field(ti.f64, shape=20000)

        @ti.kernel
        def fill():
            for i in x:
                x[i] = ti.randn()

        fill()
        return x.to_numpy()

    interp, fast = draw("interp"), draw("fast")
    np.testing.assert_allclose(interp, fast, rtol=1e-6, atol=1e-6)   # (f32 log, cos: an ulp)
    assert abs(fast.mean()) < 0.03 and abs(fast.std() - 1) < 0.02     # 20000 draws: ~4 sigma
    assert abs(np.mean(np.abs(fast) < 1) - 0.6827) < 0.015            # a normal, not a uniform
    with pytest.raises(ti.TinyadTypeError, match="ti.randn draws floats"):
        ti.randn(ti.i32)


def test_ti_random_gives_the_same_numbers_in_interp_and_fast_mode():
    def draw(mode, seed):
        ti.init(mode=mode, random_seed=seed)
        a = ti.field(ti.f32, shape=6)
        b = ti.field(ti.f64, shape=(3, 2))
        c = ti.field(ti.i32, shape=5)
        top = ti.field(ti.f32, shape=2)

        @ti.kernel
        def sample():
            top[0] = ti.random()
            for i in a:
                a[i] = ti.random() + ti.random(ti.f32) * 2
            for i, j in b:
                b[i, j] = ti.random(ti.f64)
            for i in range(5):
                c[i] = ti.random(ti.i32)
            top[1] = ti.random()

        sample()
        first = [f.to_numpy() for f in (a, b, c, top)]
        sample()                              # a new launch: a new seed, new numbers
        return first, [f.to_numpy() for f in (a, b, c, top)]

    interp, fast = draw("interp", 7), draw("fast", 7)
    for launch in range(2):
        for p, q in zip(interp[launch], fast[launch]):
            np.testing.assert_array_equal(p, q)
    assert not np.array_equal(interp[0][0], interp[1][0])
    assert not np.array_equal(interp[0][0], draw("interp", 8)[0][0])
    values = interp[0][0]
    assert ((0 <= values) & (values < 3)).all() and len(set(values.tolist())) == 6


def _run(args, env=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "tinyad.cli", *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env=dict(os.environ, **(env or {})),
                          **kwargs)


def test_the_main_example_prints_the_same_energy_in_both_modes():
    energies = {}
    for mode in ("interp", "fast"):
        proc = _run(["run", "examples/gravity.py"], env={"TINYAD_MODE": mode})
        assert proc.returncode == 0, proc.stderr
        energies[mode] = [line for line in proc.stdout.splitlines() if "U =" in line]
        # the README's first command ends pointing a newcomer at lesson 1
        assert proc.stdout.rstrip().splitlines()[-1].endswith(
            "tinyad lesson 1  (tinyad lessons lists all of them)")
    assert energies["interp"] and energies["interp"] == energies["fast"]


def test_tinyad_run_into_a_closed_pipe_ends_quietly(tmp_path):
    program = tmp_path / "count.py"
    program.write_text("for i in range(200000):\n    print(i)\n")
    proc = subprocess.run(f'"{sys.executable}" -m tinyad.cli run "{program}" | head -n 1',
                          shell=True, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.stdout == "0\n"
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_missing_needs_grad_report_names_the_kernel_that_wrote_the_field(mode):
    w = ti.field(ti.f32, shape=4, needs_grad=True)
    y = ti.field(ti.f32, shape=4)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def scale():
        for i in w:
            y[i] = w[i] * 2

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i] ** 2

    with pytest.raises(ti.SilentZeroRuleError) as info:
        with ti.ad.Tape(loss=loss):
            scale()
            total()
    report = info.value.report
    assert report.write.kernel == "scale" and report.write.loc.text.strip() == "y[i] = w[i] * 2"
    assert "in scale" in str(info.value) and "Python scope" not in str(info.value)
    assert "value None" not in str(info.value)


# ---- resource limits -----------------------------------------------------------------------------

def test_a_field_too_big_for_memory_is_refused_before_allocating(mode):
    with pytest.raises(ti.TinyadRuntimeError, match=r"needs 3\.6 TiB, more than this machine"):
        ti.field(ti.f32, shape=(100000, 100000, 100))
    small = ti.field(ti.f32, shape=(3, 2))           # the next field is fine
    assert small.to_numpy().shape == (3, 2)


RUNAWAY = """
import sys
import tinyad as ti

ti.init(mode="interp")
x = ti.field(ti.f32, shape=2)


@ti.kernel
def forever():
    while x[0] >= 0.0:
        x[0] += 1.0
        x[1] = x[0] * 0.5


print("launching", flush=True)
forever()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a subprocess is POSIX")
def test_ctrl_c_stops_a_runaway_interp_loop_cleanly(tmp_path):
    program = tmp_path / "runaway.py"
    program.write_text(RUNAWAY)
    # the child must take SIGINT as a terminal would: a test worker may ignore it, and a
    # child that inherits that ignores Ctrl-C (Python installs its handler only if not ignored)
    proc = subprocess.Popen([sys.executable, str(program)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout.readline().strip() == "launching"
        time.sleep(1.5)                                    # well inside the loop by now
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()          # never leave a runaway behind (one that ignored Ctrl-C grew to GBs)
    assert proc.returncode != 0
    assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr
    assert "interp" + os.sep not in stderr and "evaluator.py" not in stderr, stderr   # no noise
    assert "    forever()" in stderr                     # the user's launch


LAUNCH_ERROR = """\
import tinyad as ti
x = ti.field(ti.f32, shape=4)


@ti.kernel
def show():
    for i in x:
        print("x = " + str(x[i]))


show()
"""


@pytest.mark.parametrize("full", [False, True])
def test_plain_python_shows_the_users_frames_only(tmp_path, full):
    """Under `python prog.py` (how most Taichi users run) a tinyad error's traceback began with
    two of tinyad's frames; TINYAD_TRACEBACK=full keeps them, to debug tinyad."""
    path = tmp_path / "prog.py"
    path.write_text(LAUNCH_ERROR)
    env = {k: v for k, v in os.environ.items() if k != "TINYAD_TRACEBACK"}
    if full:
        env["TINYAD_TRACEBACK"] = "full"
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 1
    assert f'File "{path}", line 11, in <module>' in done.stderr          # the user's call
    assert "prog.py\", line 8, in show" in done.stderr                     # and line
    assert "cannot build strings" in done.stderr
    assert ("tinyad/kernel.py" in done.stderr) == full, done.stderr
