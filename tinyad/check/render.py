"""Rendering rule-violation reports: rich in a terminal, plain text otherwise (and in messages).

    Global Data Access Rule 1: b[] was read, then changed before the adjoint used it.
      kernel func_broke_rule_1
      read  at prog.py:12, in func_broke_rule_1 (launch #3): value 10.0
          loss[None] = x[1] * b[None]
                              ^^^^^^^
      write at prog.py:13, in func_broke_rule_1 (launch #3): 10.0 -> 110.0
          b[None] += 100
          ^^^^^^^^^^^^^^
      wrong gradient: ...
      fix: ...
"""
from __future__ import annotations

import sys

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from tinyad.check.rules import Access, Report


def _value(v) -> str:
    if hasattr(v, "item"):
        v = v.item()
    return f"{v:.9g}" if isinstance(v, float) else str(v)


def _where(access: Access) -> str:
    if access.loc is None:
        return "in Python scope"
    place = f"{access.loc.file.rsplit('/', 1)[-1]}:{access.loc.line}"
    if access.kernel is None:
        return f"at {place}, in Python scope"
    text = f"at {place}, in {access.kernel}"
    if access.launch is not None:
        text += f" (launch #{access.launch}"
        text += f", iteration {access.iteration})" if access.iteration is not None else ")"
    return text


def _access_lines(label: str, access: Access, detail: str) -> list[tuple[str, str]]:
    lines = [(f"  {label} {_where(access)}{': ' + detail if detail else ''}", "bold")]
    if access.loc is not None and access.loc.text:
        for snippet_line in access.loc.snippet().splitlines()[1:]:
            lines.append(("    " + snippet_line, "cyan"))
    return lines


def _lines(report: Report) -> list[tuple[str, str]]:
    head = f"{report.rule}: {report.summary}"
    lines = [(head, "bold red")]
    if report.kernel:
        lines.append((f"  kernel {report.kernel}", ""))
    for access in report.earlier:
        lines += _access_lines(f"{access.kind:5}", access,
                               f"value {_value(access.value)}" if access.value is not None else "")
    if report.read is not None:
        lines += _access_lines("read ", report.read, f"value {_value(report.read.value)}")
    if report.write is not None:
        detail = report.write.kind
        conflict = report.rule == "Parallel loop conflict"   # two iterations, not before/after
        if report.read is not None and report.write.value is not None and not conflict:
            detail += f", {_value(report.read.value)} -> {_value(report.write.value)}"
        elif report.write.value is not None:
            detail += f", value {_value(report.write.value)}"
        lines += _access_lines("write", report.write, detail)
    if report.consequence:
        lines.append((f"  wrong gradient: {report.consequence}", "yellow"))
    if report.fix:
        lines.append((f"  fix: {report.fix}", "green"))
    return lines


def render_text(report: Report) -> str:
    return "\n".join(text for text, _ in _lines(report))


def render_rich(report: Report) -> Panel:
    body = Text()
    lines = _lines(report)
    for k, (text, style) in enumerate(lines[1:]):
        body.append(text.removeprefix("  "), style=style or None)
        if k < len(lines) - 2:
            body.append("\n")
    return Panel(body, title=Text(lines[0][0], style="bold red"), title_align="left",
                 border_style="red", expand=False)


def print_report(report: Report, file=None) -> None:
    """Show a report to the user: a rich panel in a terminal, plain text elsewhere."""
    stream = file or sys.stderr
    console = Console(file=stream, highlight=False, soft_wrap=True)
    if console.is_terminal:
        console.print(render_rich(report))
    else:
        print(render_text(report), file=stream)
