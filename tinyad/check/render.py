"""Showing rule-violation reports: a rich panel in a terminal, plain text otherwise.

The panel says what the plain text says (tinyad/check/report.py), laid out for the terminal's
width: every line wraps inside the box, a word too long for it folds, and below
MIN_BOXED_WIDTH columns the box is dropped. Nothing is cropped.
"""
from __future__ import annotations

import random
import sys

# Importing rich draws from Python's global random generator (rich.style seeds an id counter):
# restore its state so that loading tinyad never changes the user's random sequence. Other
# modules that show things with rich import this one first.
_user_random_state = random.getstate()
try:
    from rich.console import Console, ConsoleOptions, Group, RenderResult
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text
finally:
    random.setstate(_user_random_state)

from tinyad.check.report import Report, render_text, report_lines

MIN_BOXED_WIDTH = 50   # narrower than this, the border and padding cost too much of the line

_STYLES = {"kernel": "", "access": "bold", "code": "cyan", "consequence": "yellow",
           "fix": "green"}


class ReportView:
    """A report as a rich renderable that adapts to the width it is given."""

    def __init__(self, report: Report):
        self.report = report

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        rule_fits_in_border = len(self.report.rule) + 6 <= width
        if width < MIN_BOXED_WIDTH or not rule_fits_in_border:
            yield self._body(Text(self.report.title, style="bold red"))
            return
        yield Panel(self._body(Text(self.report.summary, style="bold red")),
                    title=Text(self.report.rule, style="bold red"), title_align="left",
                    border_style="red", expand=False)

    def _body(self, head: Text) -> Group:
        """The head, a table of the kernel and the accesses (label | text, the text wrapping
        under itself), then the consequence and the fix as paragraphs."""
        table = Table.grid(padding=(0, 1))
        table.add_column(no_wrap=True)
        table.add_column(overflow="fold")
        paragraphs = []
        for line in report_lines(self.report):
            style = _STYLES[line.kind] or None
            if line.kind in ("consequence", "fix"):
                paragraphs.append(Text(f"{line.label} {line.text}", style=style,
                                       overflow="fold"))
            else:
                table.add_row(Text(line.label, style=style),
                              Text(line.text, style=style, overflow="fold"))
        head.overflow = "fold"
        parts = [head] + ([table] if table.row_count else []) + paragraphs
        return Group(*parts)


def render_rich(report: Report) -> ReportView:
    return ReportView(report)


def print_report(report: Report, file=None) -> None:
    """Show a report to the user: a rich panel in a terminal, plain text elsewhere."""
    stream = file or sys.stderr
    console = Console(file=stream, highlight=False)
    if console.is_terminal:
        console.print(render_rich(report))
    else:
        print(render_text(report), file=stream)
