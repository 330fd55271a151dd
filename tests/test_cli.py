"""The `tinyad` command, run as a user runs it (a subprocess): `tinyad run` stops a program whose
gradient would be wrong, --no-check runs it anyway, options work wherever they stand before the
program's path, and `tinyad check` counts one violation per report."""
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def tinyad(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tinyad.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def program(tmp_path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


# Global Data Access Rule 1 across two kernels: the adjoint of use_b would replay b = 4, not 3.
OVERWRITE_ACROSS_KERNELS = """
    import taichi as ti
    ti.init()
    x = ti.field(ti.f32, shape=2, needs_grad=True)
    b = ti.field(ti.f32, shape=(), needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def use_b():
        loss[None] += x[0] * b[None]

    @ti.kernel
    def bump_b():
        b[None] = b[None] + 1.0

    x[0] = 2.0
    b[None] = 3.0
    with ti.ad.Tape(loss):
        use_b()
        bump_b()
    print("x.grad[0] =", x.grad[0])
"""

# y has no gradient, so loss's gradient never reaches x through it: x.grad stays 0, not 2.
MISSING_NEEDS_GRAD = """
    import taichi as ti
    ti.init()
    x = ti.field(ti.f32, shape=(), needs_grad=True)
    y = ti.field(ti.f32, shape=())
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def double():
        y[None] = 2.0 * x[None]

    @ti.kernel
    def total():
        loss[None] = y[None]

    x[None] = 1.0
    with ti.ad.Tape(loss):
        double()
        total()
    print("x.grad =", x.grad[None])
"""

# Two bugs: iterations i and i + 1 of a parallel loop share x[i] for i = 1..6 (six elements),
# and b[] is read, then overwritten in the Tape (one element).
TWO_BUGS = """
    import taichi as ti
    ti.init()
    x = ti.field(ti.f32, shape=8, needs_grad=True)
    b = ti.field(ti.f32, shape=(), needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def shift():
        for i in range(1, 8):
            x[i] = x[i - 1] * 2.0

    @ti.kernel
    def total():
        for i in range(8):
            loss[None] += x[i] * b[None]
        b[None] += 1.0

    for i in range(8):
        x[i] = i
    b[None] = 3.0
    with ti.ad.Tape(loss):
        shift()
        total()
    print("finished")
"""

SHOW_OPTIONS = """
    import sys
    import taichi as ti
    from tinyad.runtime import runtime
    ti.init()
    print(runtime.config.mode, runtime.config.check, sys.argv[1:])
"""


def test_run_stops_the_broken_example_with_its_report():
    result = tinyad("run", EXAMPLES / "broken_rule1.py")
    assert result.returncode == 1
    assert "Global Data Access Rule 1: b[] was read" in result.stderr
    assert "10 -> 110" in result.stderr and "fix:" in result.stderr
    assert "x.grad[1]" not in result.stdout   # stopped before the wrong gradient was used


def test_run_no_check_runs_it_as_taichi_would():
    result = tinyad("run", "--no-check", EXAMPLES / "broken_rule1.py")
    assert result.returncode == 0, result.stderr
    assert "x.grad[1] = 110.0" in result.stdout and "Rule" not in result.stderr


def test_run_stops_a_read_then_overwrite_across_two_kernels(tmp_path):
    result = tinyad("run", program(tmp_path, "across.py", OVERWRITE_ACROSS_KERNELS))
    assert result.returncode == 1
    assert "Global Data Access Rule 1: b[] was read" in result.stderr
    assert "across.py:10" in result.stderr and "across.py:14" in result.stderr
    assert "x.grad[0]" not in result.stdout


def test_run_stops_a_missing_needs_grad_on_an_intermediate_field(tmp_path):
    result = tinyad("run", program(tmp_path, "nograd.py", MISSING_NEEDS_GRAD))
    assert result.returncode == 1
    assert "Missing gradient on the path" in result.stderr
    assert "declare y with needs_grad=True" in result.stderr


@pytest.mark.parametrize("argv, expected", [
    (["run", "--mode", "fast", "{p}", "--", "a", "--mode", "b"],
     "fast error ['a', '--mode', 'b']"),
    (["--mode", "fast", "run", "{p}"], "fast error []"),
    (["--mode=fast", "run", "--no-check", "{p}", "x"], "fast off ['x']"),
    (["--no-check", "run", "{p}"], "interp off []"),
    (["run", "{p}", "--", "--mode", "fast", "--no-check"],
     "interp error ['--mode', 'fast', '--no-check']"),
])
def test_options_before_the_path_are_tinyads_and_after_it_the_programs(tmp_path, argv, expected):
    path = program(tmp_path, "show.py", SHOW_OPTIONS)
    result = tinyad(*[str(path) if a == "{p}" else a for a in argv])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


@pytest.mark.parametrize("after", [["--mode", "fast"], ["--mode=fast"], ["x", "--no-check"]])
def test_tinyads_options_after_the_path_are_refused_not_handed_on(tmp_path, after):
    """`tinyad run prog.py --mode fast` gave `--mode fast` to the program and ran interp mode
    without a word."""
    path = program(tmp_path, "show.py", SHOW_OPTIONS)
    result = tinyad("run", str(path), *after)
    assert result.returncode == 2 and result.stdout == ""
    assert "put it before the path" in result.stderr and "`--`" in result.stderr


def test_check_in_fast_mode_reports_the_violations_and_says_which_mode_ran(tmp_path):
    path = program(tmp_path, "two.py", TWO_BUGS)
    for argv in (["check", "--mode", "fast", path], ["--mode", "fast", "check", path]):
        result = tinyad(*argv)
        assert result.returncode == 1, result.stderr
        assert "finished" in result.stdout
        assert "[tinyad] check: 2 autodiff rule violations found (fast mode)" in result.stderr
        assert "Parallel loop conflict in shift" in result.stderr
        assert "Global Data Access Rule 1 in total: 1 element (b[])" in result.stderr


def test_check_of_a_program_that_chooses_fast_mode_checks_it(tmp_path):
    path = program(tmp_path, "fast.py", "import taichi as ti\nti.init(mode='fast')\n")
    result = tinyad("check", "--mode", "interp", path)
    assert result.returncode == 0, result.stderr
    assert "no autodiff rule violations (fast mode)" in result.stderr
    assert "the program's ti.init chose fast mode" in result.stderr


def test_check_says_nothing_was_checked_when_the_program_turns_checks_off(tmp_path):
    path = program(tmp_path, "off.py", "import taichi as ti\nti.init(check='off')\n")
    result = tinyad("check", path)
    assert result.returncode == 2
    assert "nothing was checked" in result.stderr and "no autodiff rule violations" not in \
        result.stderr


def test_check_counts_one_violation_per_report_with_its_elements(tmp_path):
    # interp mode: it checks every element of a launch (fast mode stops at a launch's first)
    result = tinyad("check", "--mode", "interp", program(tmp_path, "two.py", TWO_BUGS))
    assert result.returncode == 1
    assert "finished" in result.stdout                  # check reports and goes on
    reports = [line for line in result.stderr.splitlines() if line.startswith(
        ("Parallel loop conflict:", "Global Data Access Rule 1:"))]
    assert len(reports) == 2, result.stderr
    assert "[tinyad] check: 2 autodiff rule violations found (interp mode)" in result.stderr
    assert "Parallel loop conflict in shift: 6 elements (x[1], x[2], x[3], ...)" in result.stderr
    assert "Global Data Access Rule 1 in total: 1 element (b[])" in result.stderr


def test_check_of_a_clean_program_says_so_in_one_line(tmp_path):
    """The verdict alone: a clean run has nothing to explain (it printed a four-line
    paragraph about the mode first)."""
    result = tinyad("check", "--mode", "interp", program(tmp_path, "show.py", SHOW_OPTIONS))
    assert result.returncode == 0
    assert result.stdout.strip() == "interp warn []"
    assert result.stderr.splitlines() == ["[tinyad] check: no autodiff rule violations "
                                          "(interp mode)"]


def test_check_gives_the_verdict_first_and_then_the_violations(tmp_path):
    result = tinyad("check", "--mode", "interp", program(tmp_path, "two.py", TWO_BUGS))
    tail = result.stderr.splitlines()[-3:]
    assert tail == ["[tinyad] check: 2 autodiff rule violations found (interp mode)",
                    "  Parallel loop conflict in shift: 6 elements (x[1], x[2], x[3], ...)",
                    "  Global Data Access Rule 1 in total: 1 element (b[])"], result.stderr


def test_check_runs_fast_mode_where_numba_is_installed(tmp_path):
    result = tinyad("check", program(tmp_path, "show.py", SHOW_OPTIONS))
    assert result.returncode == 0, result.stderr
    if importlib.util.find_spec("numba") is None:
        assert result.stdout.strip() == "interp warn []"
        assert "no autodiff rule violations (interp mode)" in result.stderr
        return
    assert result.stdout.strip() == "fast warn []"
    assert "no autodiff rule violations (fast mode)" in result.stderr


TINY_TAPED_PROGRAM = """
    import taichi as ti
    ti.init()
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    y = ti.field(ti.f32, shape=(3, 4), needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    v = ti.field(ti.f32, shape=(3, 4), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(4):
            y[t + 1, i] = ti.sin(y[t, i]) + x[i] * y[t, i]
            v[t + 1, i] = 2.0 * y[t + 1, i]     # reads what this iteration just stored

    @ti.kernel
    def total():
        for i in range(4):
            loss[None] += y[2, i] ** 2

    for i in range(4):
        x[i] = 0.1 * i
        y[0, i] = 1.0 + i
    for _ in range(2):           # untaped first, as a benchmark's warm-up does: y[1], y[2] are
        step(0)                  # computed from x before the Tape, and computed again inside it
        step(1)                  # before any taped kernel reads them
        total()
    with ti.ad.Tape(loss):
        step(0)
        step(1)
        total()
    print("x.grad", [round(x.grad[i], 4) for i in range(4)])
"""


def test_check_of_a_clean_time_stepped_program_reports_nothing(tmp_path):
    """Fields written before the Tape and rewritten inside it before the taped reads (a
    warm-up round) are clean: nothing is reported, in the mode `tinyad check` picks."""
    result = tinyad("check", program(tmp_path, "steps.py", TINY_TAPED_PROGRAM))
    assert result.returncode == 0, result.stderr
    assert "x.grad" in result.stdout
    assert "no autodiff rule violations" in result.stderr
    assert "before the Tape" not in result.stderr, result.stderr


def test_bench_passes_its_arguments_to_the_benchmarks_from_any_directory(tmp_path):
    done = tinyad("bench", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # the usage line names the command it was called as (it said `python -m benchmarks`)
    assert done.stdout.startswith("usage: tinyad bench") and "--peers" in done.stdout
    done = tinyad("bench", "--only", "nonesuch", cwd=tmp_path)
    assert done.returncode != 0 and "nonesuch" in done.stdout + done.stderr


def test_bench_runs_tinyads_benchmarks_beside_a_users_own_benchmarks_package(tmp_path):
    """A user's project with its own `benchmarks/` package: `tinyad bench` ran that (it was
    `python -m benchmarks`, and the working directory comes first on the path)."""
    users = tmp_path / "benchmarks"
    users.mkdir()
    (users / "__init__.py").write_text("")
    (users / "__main__.py").write_text("print('the user program ran')\n")
    done = tinyad("bench", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "the user program ran" not in done.stdout
    assert done.stdout.startswith("usage: tinyad bench")


def test_an_error_in_a_terminal_wraps_between_words_and_keeps_its_source_lines(tmp_path,
                                                                              monkeypatch):
    """In a terminal (here 40 columns) the message and hint wrap at word boundaries, as the
    terminal would otherwise cut words in two; the source line and carets stay whole."""
    import io

    from tinyad.cli import _print_error
    from tinyad.core.errors import TinyadRuntimeError
    from tinyad.core.srcloc import SrcLoc

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    message = "the value returned by an atomic operation cannot be replayed by the adjoint"
    hint = "record the returned values in a field in a separate kernel"
    path = program(tmp_path, "prog.py", "\n" * 9 + "        old = ti.atomic_add(loss[None], "
                   "x[i])  # a line wider than the terminal\n")
    loc = SrcLoc(str(path), 10, 14, end_col=45, function="k")
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setattr(sys, "stderr", Terminal())
    _print_error(TinyadRuntimeError(message, loc, hint=hint))
    lines = sys.stderr.getvalue().splitlines()
    source = loc.snippet().splitlines()
    assert [line for line in lines if line in source] == source
    prose = [line for line in lines if line not in source]
    assert all(len(line) <= 40 for line in prose)
    words = " ".join(prose).split()
    assert words == f"TinyadRuntimeError: {message} hint: {hint}".split()


def test_a_mistyped_lesson_or_example_gets_a_did_you_mean():
    lesson = tinyad("lesson", "gravty", "--no-pause")
    assert lesson.returncode == 2 and "did you mean 'gravity'?" in lesson.stderr, lesson.stderr
    example = tinyad("example", "gravty")
    assert example.returncode == 2 and "did you mean 'gravity'?" in example.stderr, \
        example.stderr


def test_the_example_listing_fits_80_columns_between_words():
    """Its summaries ran to 104 columns, and a terminal cut them mid-word."""
    from tinyad.cli import _example_listing, _examples
    listing = _example_listing(_examples(), 80)
    assert max(len(line) for line in listing.splitlines()) <= 80
    words = " ".join(listing.split())
    assert "minus the gradient of the potential energy." in words


def test_every_example_takes_help():
    """`--help` ran the main example (gravity) to its end, silently ignored."""
    from tinyad.cli import _examples
    for name, path in _examples().items():
        done = tinyad("run", path, "--help")
        assert done.returncode == 0 and done.stdout.startswith("usage:"), (name, done.stderr)


def test_the_main_example_draws_its_forces_with_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from tinyad.cli import _examples
    picture = tmp_path / "forces.png"
    done = tinyad("run", _examples()["gravity"], "--plot", picture)
    assert done.returncode == 0, done.stderr
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
