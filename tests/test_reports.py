"""Rule reports: every rule's constructor, and the rich panel at terminal widths. The truth for the
panel is the plain-text report: every word of it must be on screen, in order, at any width."""
import ast
import io
import re
import sys
from pathlib import Path

import pytest
from rich.console import Console

import tinyad as ti
from tinyad.check import rules
from tinyad.check.render import print_report, render_rich
from tinyad.check.report import Access, render_text
from tinyad.core.srcloc import SrcLoc

FIELD = "particle_velocity_history_of_the_whole_simulation"
ELEMENT = (1023, 65535)
READ_LINE = f"    loss_of_the_whole_simulation_run[None] += weights[1] * {FIELD}[step, i]"
WRITE_LINE = f"    {FIELD}[step, i] = {FIELD}[step, i] + 1234567.891011 * damping_coefficient"


@pytest.fixture(scope="module")
def locs(tmp_path_factory):
    source = tmp_path_factory.mktemp("prog") / "a_program_with_a_rather_long_file_name.py"
    source.write_text(f"def kernel():\n{READ_LINE}\n{WRITE_LINE}\n")
    read = SrcLoc(str(source), 2, READ_LINE.index(FIELD), len(READ_LINE), "kernel")
    write = SrcLoc(str(source), 3, 4, len(WRITE_LINE), "kernel")
    return read, write


KERNEL = "advance_the_particles_by_one_time_step"


def representative_reports(locs):
    """One report of each rule, with long names and values."""
    read_loc, write_loc = locs
    read = Access("read", read_loc, KERNEL, 12, 1023, 0.123456789)
    write = Access("store", write_loc, KERNEL, 12, 4095, 1234567.891011)
    add = Access("atomic_add", write_loc, KERNEL, 12, 4095, 1234567.891011)
    first = Access("store", write_loc, KERNEL, 11, 7, -98765.4321)
    python = Access("python write", write_loc, None, None, None, 42.0)
    element = dict(field=FIELD, element=ELEMENT)
    return [
        rules.read_then_overwrite(**element, read=read, write=write),
        rules.python_overwrite(**element, read=read, write=python),
        rules.second_write(**element, read=read, write=write, first_write=first),
        rules.read_during_accumulation(**element, read=read, write=add, first_accumulation=add),
        rules.parallel_conflict(kernel=KERNEL, **element, earlier=read, later=write),
        rules.parallel_conflict(kernel=KERNEL, **element, earlier=first, later=add),
        rules.replay_divergence(kernel=KERNEL, **element, read=read, now=7.5e-12,
                                last_writer=python),
        rules.custom_gradient_reads_changed(gradient="backward_of_the_step", kernel=KERNEL,
                                            **element, read=read, now=7.5e-12,
                                            last_writer=first),
        rules.random_in_adjoint(kernel=KERNEL, loc=read_loc),
        rules.custom_gradient_assigns(**element, write=write, discarded=3.25),
        rules.value_passed_around_tape(kernel=KERNEL, argument="time_step_length", **element,
                                       read=read),
        rules.missing_gradient_on_path(kernel=KERNEL, field=FIELD, read_loc=read_loc,
                                       written_at=write_loc),
        rules.no_output_gradient(kernel=KERNEL),
        rules.unseeded_outputs(kernel=KERNEL, outputs=[FIELD, "loss"], first_store=write_loc),
        rules.adjoints_out_of_order(kernel=KERNEL, launch=3, later_kernel="compute_the_loss",
                                    later_launch=4, field=FIELD),
        rules.gradient_accumulates_across_rounds(kernel=KERNEL, gradient=FIELD + ".grad",
                                                 call_loc=write_loc),
        rules.adjoint_run_twice(kernel=KERNEL, launch=12, gradient=FIELD + ".grad",
                                call_loc=write_loc),
        rules.gradient_at_two_points(kernel=KERNEL, gradient=FIELD + ".grad", param=FIELD,
                                     earlier=Access("gradient taken", read_loc),
                                     change=python, call_loc=write_loc),
        rules.missing_dual_on_path(kernel=KERNEL, field=FIELD, store_loc=write_loc),
        rules.computed_before_tape(field=FIELD, source="initial_positions", write_loc=write_loc,
                                   kernel="precompute_the_rest_lengths", taped_kernel=KERNEL,
                                   read_loc=read_loc),
        rules.custom_gradient_mismatch(
            primal="advance_with_checkpoints", gradient="advance_with_checkpoints_grad",
            call=Access("call", read_loc), definitions=[Access("primal", write_loc)],
            inputs=[f"4096 of {FIELD}'s 65536 elements (from {FIELD}[0, 0])", "weights (all 3)"],
            outputs=[f"4096 of {FIELD}'s 65536 elements (from {FIELD}[1, 0])"],
            by_fd=0.123456789, by_adjoint=-98765.4321, wrong_inputs=["weights"],
            precision="f32"),
    ]


def _report(item):
    return item.report if isinstance(item, rules.RuleViolation) else item


def on_screen(report, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), force_terminal=True, no_color=True)
    console.print(render_rich(report))
    return re.sub(r"\x1b\[[0-9;]*m", "", console.file.getvalue())   # bold is kept by no_color


BOX = re.compile(r"[\u2500-\u257f\s]")   # box drawing characters and whitespace


@pytest.mark.parametrize("width", [30, 60, 80, 100])
def test_every_word_of_every_report_is_on_screen(locs, width):
    for item in representative_reports(locs):
        report = _report(item)
        screen = on_screen(report, width)
        assert max(len(line) for line in screen.splitlines()) <= width, screen
        assert "\u2026" not in screen, screen   # rich's ellipsis: something was cut
        # The panel writes the rule as the box's heading, then the summary: "Rule N:" loses ":".
        plain = render_text(report).replace(report.title, f"{report.rule} {report.summary}", 1)
        joined = BOX.sub("", screen)   # box removed, wrapped and folded lines joined
        position = 0
        for word in plain.split():
            found = joined.find(word, position)
            assert found >= 0, f"{word!r} missing at width {width}:\n{screen}"
            position = found + len(word)


def test_wide_reports_keep_the_box_and_narrow_ones_drop_it(locs):
    report = _report(representative_reports(locs)[0])
    assert "\u256d" in on_screen(report, 80)          # the panel's top-left corner
    assert "\u256d" not in on_screen(report, 30)


def test_each_constructor_gives_its_error_class_and_names_the_element(locs):
    expected = [ti.ReadThenOverwriteRuleError, ti.ReadThenOverwriteRuleError,
                ti.SecondWriteRuleError, ti.ReadDuringAccumulationRuleError,
                ti.ParallelConflictRuleError, ti.ParallelConflictRuleError,
                ti.ReplayDivergenceRuleError, ti.ReplayDivergenceRuleError,
                ti.ReplayDivergenceRuleError, ti.SilentZeroRuleError, ti.SilentZeroRuleError, ti.SilentZeroRuleError,
                rules.Report, rules.Report, ti.SilentZeroRuleError,    # unseeded: warnings
                rules.Report, rules.Report, ti.StaleGradientRuleError,
                ti.SilentZeroRuleError, rules.Report, ti.CustomGradientRuleError]
    reports = representative_reports(locs)
    assert [type(item) for item in reports] == expected
    overwrite = reports[0]
    assert str(overwrite) == render_text(overwrite.report)
    assert overwrite.loc == overwrite.report.write.loc        # the error names the write's line
    assert f"{FIELD}[1023, 65535] = 1234567.89 instead of 0.123456789" in str(overwrite)
    assert "store, 0.123456789 -> 1234567.89" in str(overwrite)
    # two iterations: no "old -> new" between them, and no values (they depend on the order
    # the iterations ran in, which fast mode does not share with interp mode)
    conflict = reports[4].report
    assert "store" in str(conflict) and "->" not in str(conflict)
    assert "value" not in str(conflict)
    assert conflict.read.value is None and conflict.write.value is None


def test_rules_and_report_never_import_the_renderer():
    """render.py imports the catalogue, never the reverse: no import cycle."""
    check = Path(rules.__file__).parent
    for name in ("rules.py", "report.py"):
        tree = ast.parse((check / name).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                     for alias in node.names}
        assert not any(module and "render" in module for module in imported), (name, imported)


def test_print_report_in_a_terminal_wraps_too(locs, monkeypatch):
    """print_report's own console (what users see on stderr) wraps like the panel above."""
    monkeypatch.setenv("FORCE_COLOR", "1")   # rich treats the stream as a terminal
    monkeypatch.setenv("COLUMNS", "60")
    report = _report(representative_reports(locs)[0])
    stream = io.StringIO()
    print_report(report, file=stream)
    screen = re.sub(r"\x1b\[[0-9;]*m", "", stream.getvalue())
    assert "\u256d" in screen and max(len(line) for line in screen.splitlines()) <= 60, screen
    assert report.fix.split()[-1] in screen


@pytest.mark.parametrize("width", [60, 80])
def test_an_errors_message_in_a_terminal_wraps_between_words(locs, monkeypatch, width):
    """What Python prints after `tinyad.Name: ` for an uncaught rule error: in a terminal each
    line wrapped at its width, the source lines whole, every word kept in order."""
    error = representative_reports(locs)[0]
    plain = str(error)                                  # (stderr is no terminal here)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", str(width))
    prefix = f"{type(error).__module__}.{type(error).__qualname__}: "
    screen = (prefix + str(error)).splitlines()
    code = {line for line in plain.splitlines() if line.startswith(("    ", 'File "'))}
    assert all(len(line) <= width for line in screen if line not in code), screen
    assert code <= set(screen)
    assert " ".join((prefix + plain).split()) == " ".join(" ".join(screen).split())


@pytest.mark.parametrize("width", [60, 80])
def test_a_syntax_errors_message_in_a_terminal_wraps_between_words(monkeypatch, width):
    """Python prints a SyntaxError as `tinyad.TinyadSyntaxError: ` + its msg (not through
    __str__): in a terminal that msg is wrapped too, every word kept in order."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", str(width))
    message = "`Lambda` expressions are not supported in tinyad kernels, in any of their forms"
    error = ti.TinyadSyntaxError(message, SrcLoc(__file__, 1, 0, 3, "k"),
                                 hint="define a @ti.func instead")
    prefix = "tinyad.TinyadSyntaxError: "
    screen = (prefix + error.msg).splitlines()
    assert all(len(line) <= width for line in screen), screen
    assert " ".join(screen).split() == (prefix + message + " hint: define a @ti.func "
                                        "instead").split()
    assert error.unwrapped().splitlines()[0] == message       # (tinyad run wraps its own)
