"""The `tinyad` command: run an unmodified Taichi program under tinyad, check it, run examples.

    tinyad run prog.py [args...]      `import taichi` inside prog.py gets tinyad; the rule
                                      checker stops at the first violation (its report, exit
                                      status 1); --no-check runs without it
    tinyad check prog.py [args...]    report every violation and go on; exit status 1 if any
                                      (checked fast mode when numba is installed, else interp
                                      mode; --mode chooses)
    tinyad example [name]             list the examples, or run one
    tinyad lessons                    list the lessons; `tinyad lesson N` steps through one
    tinyad explain prog.py[::kernel]  a kernel's source, IR and adjoint IR side by side
    tinyad --version

tinyad's options (--mode, --no-check, --traceback) may stand anywhere before the program's path;
everything after it goes to the program. Errors in the user's program end the command with exit
status 1. A tinyad error prints its message only: it already names the user's file and line and
draws a caret under the code.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib.abc
import importlib.resources
import importlib.util
import io
import os
import runpy
import sys
import textwrap
import traceback
from pathlib import Path

import tinyad
from tinyad.check.render import print_report
from tinyad.check.rules import RuleViolation
from tinyad.core.errors import TinyadError, wrapped_for_stderr
from tinyad.excepthook import is_internal
from tinyad.explain import output_width
from tinyad.frontend import lang
from tinyad.kernel import Kernel
from tinyad.notices import note
from tinyad.runtime import MODES, runtime

# examples/ is installed as the package tinyad.examples (pyproject.toml), so a wheel has it too.
EXAMPLES_DIR = Path(str(importlib.resources.files("tinyad.examples")))


# ---- `import taichi` gives tinyad ------------------------------------------------------------
def _taichi_aliases() -> dict:
    """The module names a Taichi program imports, and the tinyad object that answers each."""
    return {"taichi": tinyad, "taichi.ad": tinyad.ad, "taichi.math": tinyad.math,
            "taichi.types": lang.types}   # a namespace class: `from taichi.types import f32`


class _NoSuchTaichiModule(importlib.abc.MetaPathFinder):
    """Say clearly that a Taichi submodule tinyad does not provide is missing.

    Without this finder, `import taichi.lang` would search tinyad's folder and load a second
    copy of a tinyad module under a Taichi name, with its own state.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("taichi."):
            provided = ", ".join(sorted(_taichi_aliases()))
            raise ModuleNotFoundError(f"tinyad stands in for taichi here and has no {fullname!r} "
                                      f"(it provides {provided})", name=fullname)
        return None


@contextlib.contextmanager
def taichi_is_tinyad():
    """While active, `import taichi` / `from taichi import ...` resolve to tinyad."""
    saved = {name: sys.modules.get(name) for name in _taichi_aliases()}
    finder = _NoSuchTaichiModule()
    sys.modules.update(_taichi_aliases())
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if finder in (sys.meta_path or ()):   # (at interpreter exit sys.meta_path may be gone)
            sys.meta_path.remove(finder)
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


# ---- running a program -----------------------------------------------------------------------
def run_program(path: Path, args: list[str], *, mode: str | None, check: str | None,
                full_traceback: bool = False) -> int:
    """Run `path` as __main__ with `args`, as `python path args...` would. -> exit status."""
    # ti.init reads TINYAD_MODE and TINYAD_CHECK; a program that never calls ti.init gets them
    # from the init below.
    env = {"TINYAD_MODE": mode, "TINYAD_CHECK": check}
    program = str(path.resolve())
    saved_argv, saved_path = sys.argv, sys.path[:]
    sys.argv = [program, *args]
    sys.path.insert(0, str(path.resolve().parent))   # the program's own folder, as python does
    try:
        with _environment(env), taichi_is_tinyad():
            tinyad.init()
            runpy.run_path(program, run_name="__main__")
    except RuleViolation as exc:   # check="error": the gradient would be wrong, so stop here
        print_report(exc.report)
        note("stopped: this program's gradient would be wrong. `tinyad check` reports every "
             "violation and goes on; --no-check runs without the checks.")
        return 1
    except TinyadError as exc:
        _print_error(exc)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:     # `tinyad run prog.py | head`: the reader left; so do we, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001  (the user's own error: report it, then exit 1)
        _print_user_traceback(exc, full_traceback)
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0


def _print_error(exc: TinyadError) -> None:
    """`Name: message`, the user's source line with its carets, and the hint. In a terminal the
    message and hint wrap between words; the source lines stay as they are."""
    print(wrapped_for_stderr(f"{type(exc).__name__}: {exc.unwrapped()}"), file=sys.stderr)


@contextlib.contextmanager
def _environment(variables: dict):
    """Set the environment variables whose value is not None, and restore them afterwards."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update({name: value for name, value in variables.items() if value is not None})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _is_frozen(filename: str) -> bool:
    return filename.startswith("<frozen")   # runpy and importlib, compiled into Python


def _print_user_traceback(exc: BaseException, full: bool) -> None:
    """Python's traceback, without the frames of tinyad, runpy and this command."""
    report = traceback.TracebackException.from_exception(exc)
    frames = list(report.stack)
    hidden_at_top = bool(frames) and is_internal(frames[-1].filename) and not full
    if not full:
        report.stack = traceback.StackSummary.from_list(
            [f for f in frames if not (is_internal(f.filename) or _is_frozen(f.filename))])
    if report.stack or not isinstance(exc, SyntaxError):
        print("".join(report.format()), end="", file=sys.stderr)
    else:   # a syntax error in the program itself: Python's own caret display says it all
        print("".join(report.format_exception_only()), end="", file=sys.stderr)
    if hidden_at_top and frames[-1].filename != __file__:
        note("raised inside tinyad; --traceback shows tinyad's own frames")


# ---- examples --------------------------------------------------------------------------------
def _examples() -> dict[str, Path]:
    if not EXAMPLES_DIR.is_dir():
        return {}
    return {p.stem: p for p in sorted(EXAMPLES_DIR.glob("*.py")) if not p.stem.startswith("_")}


def _summary(path: Path) -> str:
    """The first line of the example's docstring."""
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip().strip('"').strip("'").strip()
        if text:
            return text
    return ""


def _example_listing(examples: dict, width: int) -> str:
    """One row an example; a summary too long for the line continues under itself, between
    words (as the lessons' listing)."""
    name_width = max(len(name) for name in examples)
    indent = " " * (2 + name_width + 2)
    rows = [textwrap.fill(f"  {name:<{name_width}}  {_summary(path)}", width,
                          subsequent_indent=indent, break_long_words=False)
            for name, path in examples.items()]
    return "\n".join([*rows, "", "run one with: tinyad example NAME"])


def _example_command(options) -> int:
    examples = _examples()
    if not examples:
        print(f"tinyad example: no examples found (looked in {EXAMPLES_DIR}); they come with "
              "a source checkout of tinyad", file=sys.stderr)
        return 1
    if options.name is None:
        print(_example_listing(examples, output_width()))
        return 0
    name = options.name.removesuffix(".py")
    if name not in examples:
        close = difflib.get_close_matches(name, list(examples), n=1)
        meant = f"did you mean {close[0]!r}? " if close else ""
        print(wrapped_for_stderr(f"tinyad example: no example {name!r}; {meant}choose one of: "
                                 f"{', '.join(examples)}"), file=sys.stderr)
        return 2
    return run_program(examples[name], options.args, mode=_option(options, "mode"),
                       check=_run_check(options), full_traceback=_option(options, "traceback"))


# ---- the command line ------------------------------------------------------------------------
COMMANDS_WITH_A_PROGRAM = ("run", "check", "example")


def _tinyad_options() -> argparse.ArgumentParser:
    """The options tinyad reads before the program's path, on the command or before it. Their
    default is SUPPRESS, so that a subcommand does not overwrite one given before it."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--mode", choices=MODES, default=argparse.SUPPRESS,
                         help="execution mode (sets TINYAD_MODE)")
    options.add_argument("--no-check", action="store_true", default=argparse.SUPPRESS,
                         help="run without the autodiff rule checker (both modes check "
                              "by default)")
    options.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS,
                         help="on an error, show tinyad's own frames too (to debug tinyad)")
    return options


def _option(options, name: str):
    return getattr(options, name, None)


def split_program_arguments(argv: list[str]) -> tuple[list[str], list[str]]:
    """(tinyad's arguments, up to the program's path or the example's name; the program's
    arguments, everything after it, passed on untouched, options included)."""
    command, position = None, 0
    while position < len(argv):
        arg = argv[position]
        if arg == "--mode":
            position += 2           # the option and its value
        elif arg.startswith("-"):
            position += 1
        elif command is None:
            command = arg
            if command not in COMMANDS_WITH_A_PROGRAM:
                return argv, []
            position += 1
        else:
            return argv[:position + 1], argv[position + 1:]
    return argv, []


# tinyad's own options: after the program's path they would go to the program unseen by tinyad
OWN_OPTIONS = ("--mode", "--no-check", "--traceback")


def _program_arguments(parser, command: str, args: list[str]) -> list[str]:
    """The program's arguments. One of tinyad's options among them is refused, naming where it
    belongs (`tinyad run prog.py --mode fast` ran interp mode without a word); `--` right after
    the path passes everything after it to the program as it is."""
    if args[:1] == ["--"]:
        return args[1:]
    for arg in args:
        option = arg.split("=", 1)[0]
        if option in OWN_OPTIONS:
            print(wrapped_for_stderr(
                f"tinyad {command}: {arg} after the program goes to the program, not to tinyad: "
                f"put it before the path (tinyad {command} {arg} ...), or write `--` after the "
                "path to give it to the program"), file=sys.stderr)
            raise SystemExit(2)
    return args


def build_parser() -> argparse.ArgumentParser:
    options = _tinyad_options()
    parser = argparse.ArgumentParser(
        prog="tinyad", description="Taichi-style differentiable programming you can see inside.",
        parents=[options])
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, text in (("run", "run a Taichi program under tinyad; it stops at the first "
                               "autodiff rule violation"),
                       ("check", "run a Taichi program, report every autodiff rule violation "
                                 "and go on. It runs in fast mode when numba is installed: "
                                 "every rule at compiled speed, with the accesses the IR "
                                 "cannot settle recorded element by element inside the compiled "
                                 "kernel; --mode interp runs the same checks in the "
                                 "interpreter, 100-1000x slower")):
        sub = commands.add_parser(name, help=text, parents=[options],
                                  description=text + "; `import taichi` inside it gets tinyad")
        sub.add_argument("program", help="the Python file to run")
        sub.add_argument("args", nargs="*", help="arguments for the program (everything after "
                         "its path)")
    sub = commands.add_parser("lesson", help="step through a lesson: Enter steps, b goes back, "
                              "q quits", parents=[options])
    sub.add_argument("lesson", nargs="?", help="its number or name (omit to list them)")
    sub.add_argument("--no-pause", action="store_true", help="run straight through (also when "
                     "input or output is not a terminal)")
    commands.add_parser("lessons", help="list the lessons")
    commands.add_parser("bench", add_help=False,
                        help="tinyad's benchmarks: the four workloads in fast mode, side by "
                             "side with Taichi, Warp and JAX where installed (its options "
                             "follow: tinyad bench --help)")
    sub = commands.add_parser("explain", help="show a kernel's source, IR and adjoint IR side by "
                              "side, the reads its adjoint replays, and the recording variant "
                              "the rule checker runs where the IR leaves a launch's accesses "
                              "open", parents=[options])
    sub.add_argument("target", metavar="prog.py[::kernel]", help="the program (it is run with "
                     "the rule checks off, to define its kernels), and one kernel of it")
    sub = commands.add_parser("example", help="list the examples, or run one", parents=[options])
    sub.add_argument("name", nargs="?", help="the example to run (omit to list them)")
    sub.add_argument("args", nargs="*", help="arguments for the example (everything after "
                     "its name)")
    return parser


def _version() -> str:
    import numpy  # noqa: PLC0415

    return (f"tinyad {tinyad.__version__} (Python {sys.version.split()[0]}, "
            f"numpy {numpy.__version__})")


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:     # `tinyad example | head`: the reader left; so do we, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:
        return _bench_command(argv[1:])
    parser = build_parser()
    ours, program_args = split_program_arguments(argv)
    options = parser.parse_args(ours)
    if options.command in COMMANDS_WITH_A_PROGRAM:
        options.args = _program_arguments(parser, options.command, program_args)
    if options.command is None:
        parser.print_help(sys.stderr)
        return 2
    if options.command == "example":
        return _example_command(options)
    if options.command in ("lesson", "lessons"):
        return _lesson_command(options)
    if options.command == "explain":
        return _explain_command(options)
    path = Path(options.program)
    if not path.is_file():
        parser.error(f"{options.command}: no such file: {options.program}")
    if options.command == "run":
        return run_program(path, options.args, mode=_option(options, "mode"),
                           check=_run_check(options), full_traceback=_option(options, "traceback"))
    return _check_command(path, options)


def _bench_command(bench_args: list[str]) -> int:
    """tinyad's benchmarks (`python -m tinyad.benchmarks`) with the same arguments, in their own
    process: from any directory, whatever the user's own folders are called."""
    import subprocess  # noqa: PLC0415
    try:
        return subprocess.call([sys.executable, "-m", "tinyad.benchmarks", *bench_args],
                               env=dict(os.environ, TINYAD_BENCH_PROG="tinyad bench"))
    except KeyboardInterrupt:
        return 130


def _lesson_command(options) -> int:
    from tinyad import lessons  # noqa: PLC0415
    if options.command == "lessons" or options.lesson is None:
        print(lessons.listing())
        return 0
    try:
        lesson = lessons.find(options.lesson)
    except lessons.NoSuchLesson as exc:
        print(wrapped_for_stderr(f"tinyad lesson: {exc}"), file=sys.stderr)
        return 2
    try:
        with _environment({"TINYAD_MODE": _option(options, "mode")}):
            lessons.run(lesson.number, pause=not options.no_pause)
    except KeyboardInterrupt:   # Ctrl-C while a step runs: quit quietly, as `q` does
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:     # `tinyad lesson 3 | head`: the reader left; so do we, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except TinyadError as exc:
        _print_error(exc)
        return 1
    return 0


def _explain_command(options) -> int:
    from tinyad.explain import explain  # noqa: PLC0415
    program, _, name = options.target.partition("::")
    path = Path(program)
    if not path.is_file():
        print(f"tinyad explain: no such file: {program}", file=sys.stderr)
        return 2
    namespace, error = _define_kernels(path)
    kernels = {key: value for key, value in namespace.items() if isinstance(value, Kernel)}
    if name:
        if name not in kernels:
            print(f"tinyad explain: {program} defines no kernel {name!r}"
                  + (f"; it defines: {', '.join(kernels)}" if kernels else "")
                  + (f" (it stopped early: {error})" if error else ""), file=sys.stderr)
            return 2
        kernels = {name: kernels[name]}
    if not kernels:
        print(f"tinyad explain: {program} defines no kernel", file=sys.stderr)
        return 2
    try:
        print("\n\n".join(explain(kernel) for kernel in kernels.values()))
    except TinyadError as exc:
        _print_error(exc)
        return 1
    return 0


def _define_kernels(path: Path) -> tuple[dict, str | None]:
    """Run the program (checks off, its output hidden) in a namespace we keep even if it
    stops with an error: the kernels defined before it are still there. -> (namespace, the
    error or None)."""
    program = str(path.resolve())
    namespace = {"__name__": "__main__", "__file__": program}
    saved_argv, saved_path = sys.argv, sys.path[:]
    sys.argv = [program]
    sys.path.insert(0, str(path.resolve().parent))
    error = None
    try:
        with _environment({"TINYAD_CHECK": "off"}), taichi_is_tinyad(), \
                contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            tinyad.init()
            exec(compile(path.read_text(encoding="utf-8"), program, "exec"), namespace)  # noqa: S102
    except (Exception, SystemExit) as exc:  # noqa: BLE001  (its kernels may be defined already)
        error = f"{type(exc).__name__}: {exc}"
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return namespace, error


def _run_check(options) -> str | None:
    """`tinyad run` checks like `python prog.py` does (ti.init's default, check="error"):
    a wrong gradient must not flow on into the rest of the program."""
    return "off" if _option(options, "no_check") else "error"


def default_check_mode() -> str:
    """`tinyad check`'s mode when --mode is not given: fast mode where numba is installed.
    Within a launch it records the accesses the IR cannot settle (tinyad/check/accessrecord.py), so
    small programs lose nothing, and real programs finish (interp mode runs them 100-1000x
    slower than fast mode)."""
    return "fast" if importlib.util.find_spec("numba") is not None else "interp"


def _check_command(path: Path, options) -> int:
    """Run with every violation reported (warn mode); exit status 1 if there was one."""
    if _option(options, "no_check"):
        print("tinyad check: --no-check leaves nothing to do; `tinyad run --no-check "
              f"{options.program}` runs it unchecked.", file=sys.stderr)
        return 2
    mode = _option(options, "mode") or default_check_mode()
    status = run_program(path, options.args, mode=mode, check="warn",
                         full_traceback=_option(options, "traceback"))
    ran = runtime.config.mode
    problems = runtime.backend.checks.problems()
    if problems:
        count = f"{len(problems)} autodiff rule violation{'s' if len(problems) > 1 else ''}"
        note(f"check: {count} found ({ran} mode)")
        for problem in problems:
            print(f"  {_problem_line(problem)}", file=sys.stderr)
    elif runtime.config.check == "off":
        note('check: nothing was checked: the program calls ti.init(check="off"), which runs '
             "no rule checks")
        return status or 2
    elif status == 0:
        note(f"check: no autodiff rule violations ({ran} mode)")
    if ran != mode:     # the one thing about the mode that needs saying
        note(f"check: the program's ti.init chose {ran} mode"
             + (f" over --mode {mode}" if _option(options, "mode") else ""))
    return status or (1 if problems else 0)


def _problem_line(problem) -> str:
    """`Parallel loop conflict in shift: 6 elements (x[1], x[2], x[3], ...)`"""
    report = problem.report
    text = report.rule + (f" in {report.kernel}" if report.kernel else "")
    elements = sorted((e for e in problem.elements if e), key=_natural)
    if elements:
        shown = ", ".join(elements[:3]) + (", ..." if len(elements) > 3 else "")
        text += f": {len(elements)} element{'s' if len(elements) > 1 else ''} ({shown})"
    return text


def _natural(element: str):
    """x[2] before x[10]."""
    name, _, index = element.partition("[")
    return name, [int(i) for i in index.rstrip("]").split(",") if i.strip()]


if __name__ == "__main__":
    sys.exit(main())
