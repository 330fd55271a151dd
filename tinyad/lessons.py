"""`tinyad lesson N`: step through a lesson file, cell by cell.

A lesson is a Python file in lessons/ split into cells by `# %%` lines (the format Jupyter and
VS Code understand). Markdown cells are printed as text; code cells are shown, run in one
namespace, and followed by their output. Between cells the runner waits for Enter, unless
`pause=False` (tests, `--no-pause`)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

LESSONS = Path(__file__).resolve().parent.parent / "lessons"
CELL = re.compile(r"^# %%(.*)$", re.MULTILINE)


def lesson_files() -> list[Path]:
    return sorted(LESSONS.glob("[0-9][0-9]_*.py"))


def find(number: int) -> Path:
    for path in lesson_files():
        if int(path.name[:2]) == number:
            return path
    raise SystemExit(f"no lesson {number}; there are: "
                     + ", ".join(p.stem for p in lesson_files()))


def cells(text: str) -> list[tuple[str, str, int]]:
    """[(kind, source, first line)] with kind "markdown" or "code"."""
    out = []
    marks = list(CELL.finditer(text))
    for k, mark in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        body = text[mark.end():end]
        first_line = text.count("\n", 0, mark.end()) + 1
        if "[markdown]" in mark.group(1):
            body = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#")
                             for line in body.strip().splitlines())
            out.append(("markdown", body, first_line))
        else:
            out.append(("code", body, first_line))
    return out


def run(number: int, pause: bool = True) -> None:
    import tinyad.check.render  # noqa: F401, PLC0415  (imports rich, keeping random's state)
    from rich.console import Console  # noqa: PLC0415
    from rich.markdown import Markdown  # noqa: PLC0415
    from rich.syntax import Syntax  # noqa: PLC0415

    path = find(number)
    console = Console()
    namespace = {"__name__": "__lesson__", "__file__": str(path)}
    steps = cells(path.read_text())
    for k, (kind, source, first_line) in enumerate(steps):
        if kind == "markdown":
            console.print(Markdown(source))
            continue
        console.print(Syntax(source.strip(), "python", theme="ansi_dark", word_wrap=True))
        sys.stdout.flush()
        # padded so that line numbers (and tinyad's source lookups) match the lesson file
        code = compile("\n" * (first_line - 1) + source, str(path), "exec")
        exec(code, namespace)  # noqa: S102  (running the lesson's own code is the point)
        sys.stdout.flush()
        if pause and k < len(steps) - 1:
            console.input("[dim]-- Enter for the next step --[/dim]")
