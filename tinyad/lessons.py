"""`tinyad lesson N`: step through a lesson, `tinyad lessons`: list them.

A lesson is a Python file in lessons/ (installed as tinyad.lesson_files) split into cells by
`# %%` lines, the format Jupyter and VS Code understand, so `python lessons/03_gravity.py` runs
it too. A step is a prose cell (`# %% [markdown]`) and the code cell after it. The runner shows
the step's prose, then its code, runs the code in the lesson's namespace and shows its output.

In a terminal it pauses after each step: Enter goes on, `b` shows the step before again (from
what it printed; nothing is run twice), `q`, Ctrl-C or Ctrl-D quit. When input or output is not
a terminal, or with pause=False, it runs straight through.
"""
from __future__ import annotations

import contextlib
import difflib
import io
import re
import sys
import textwrap
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tinyad.explain import output_width

CELL = re.compile(r"^# %%(.*)$", re.MULTILINE)
HEADING = re.compile(r"^#+\s+(?:Lesson \d+:\s*)?(.*)$")


@dataclass
class Step:
    prose: str        # markdown, without the leading "# "
    code: str         # the code cell, as written
    first_line: int   # line of the code cell's first line in the lesson file


@dataclass
class Lesson:
    path: Path

    @property
    def number(self) -> int:
        return int(self.path.name[:2])

    @property
    def name(self) -> str:
        return self.path.stem[3:]

    @property
    def title(self) -> str:
        for step in self.steps():
            for line in step.prose.splitlines():
                match = HEADING.match(line)
                if match:
                    return match.group(1).strip()
        return self.name.replace("_", " ")

    def steps(self) -> list[Step]:
        return steps_of(self.path.read_text(encoding="utf-8"))


def lessons_dir() -> Path:
    return Path(str(resources.files("tinyad.lesson_files")))


def all_lessons() -> list[Lesson]:
    return [Lesson(p) for p in sorted(lessons_dir().glob("[0-9][0-9]_*.py"))]


def lesson_files() -> list[Path]:
    return [lesson.path for lesson in all_lessons()]


class NoSuchLesson(LookupError):
    pass


def find(key) -> Lesson:
    """A lesson by number (3, "03") or name ("gravity", "03_gravity", a unique prefix)."""
    lessons = all_lessons()
    text = str(key).strip().removesuffix(".py")
    if text.isdigit():
        found = [lesson for lesson in lessons if lesson.number == int(text)]
    else:
        found = [lesson for lesson in lessons if text in (lesson.name, lesson.path.stem)]
        found = found or [lesson for lesson in lessons if lesson.name.startswith(text)]
    if len(found) != 1:
        names = ", ".join(f"{lesson.number} {lesson.name}" for lesson in lessons)
        what = "matches several lessons" if found else "is no lesson"
        close = difflib.get_close_matches(text, [lesson.name for lesson in lessons], n=1)
        meant = f"did you mean {close[0]!r}? " if close and not found else ""
        raise NoSuchLesson(f"{key!r} {what}; {meant}there are: {names}")
    return found[0]


def steps_of(text: str) -> list[Step]:
    """Prose cells and code cells paired: each code cell with the prose cells before it."""
    steps, prose = [], []
    marks = list(CELL.finditer(text))
    for k, mark in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        body = text[mark.end():end].strip("\n")
        if "[markdown]" in mark.group(1):
            prose.append("\n".join(line[2:] if line.startswith("# ") else line.lstrip("#")
                                   for line in body.splitlines()))
        else:
            first_line = text.count("\n", 0, mark.end()) + 2
            steps.append(Step("\n\n".join(prose), body.rstrip(), first_line))
            prose = []
    if prose:
        steps.append(Step("\n\n".join(prose), "", 0))
    return steps


# ---- showing a step -------------------------------------------------------------------------
def render_prose(markdown: str, width: int) -> str:
    """Markdown as plain text: paragraphs filled to `width`, headings, lists and indented or
    fenced code kept as written (code lines are never wrapped)."""
    out = []
    for block in re.split(r"\n\s*\n", markdown.strip()):
        lines = block.splitlines()
        if block.startswith("#"):
            out.append(HEADING.sub(r"\1", lines[0]).upper() if block.startswith("# ")
                       else lines[0].lstrip("# "))
        elif block.startswith(("    ", "```", "|")) or all(
                line.lstrip().startswith(("- ", "* ", "1", "2", "3", "4", "5")) for line in lines):
            out.append("\n".join(line for line in lines if not line.startswith("```")))
        else:
            out.append(textwrap.fill(" ".join(line.strip() for line in lines), width))
    return "\n\n".join(out)


def render_code(code: str) -> str:
    return "\n".join(f"  {line}".rstrip() for line in code.splitlines())


def run_step(step: Step, namespace: dict, path: Path) -> str:
    """Run the step's code; -> everything it printed (stdout and stderr, in order)."""
    buffer = io.StringIO()
    # padded so that line numbers (and tinyad's source lookups) match the lesson file
    code = compile("\n" * (step.first_line - 1) + step.code, str(path), "exec")
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        exec(code, namespace)  # noqa: S102  (running the lesson's own code is the point)
    return buffer.getvalue()


def header(lesson: Lesson, k: int, count: int, width: int) -> str:
    """`-- lesson N: title -- step k/n -----`, the step on a line of its own when the title
    leaves no room for it."""
    title, step = f"-- lesson {lesson.number}: {lesson.title}", f"-- step {k + 1}/{count} "
    rule = f"{title} {step}" if len(title) + 1 + len(step) <= width else f"{title}\n{step}"
    last = rule.rsplit("\n", 1)[-1]
    return rule + "-" * max(0, width - len(last))


def fit_output(output: str, width: int) -> str:
    """What a step printed, each line longer than `width` wrapped between words under its own
    indentation (a rule report's sentences); shorter lines, code among them, as printed."""
    lines = []
    for line in output.rstrip().splitlines():
        if len(line) <= width:
            lines.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()))
        lines.append(textwrap.fill(line, width, subsequent_indent=indent + "  ",
                                   break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines)


def screen(lesson: Lesson, k: int, count: int, step: Step, output: str, width: int) -> str:
    parts = [header(lesson, k, count, width)]
    if step.prose:
        parts.append(render_prose(step.prose, width))
    if step.code:
        parts.append(render_code(step.code))
    if output.strip():
        parts.append(fit_output(output, width))
    return "\n\n".join(parts) + "\n"


# ---- the stepping loop ----------------------------------------------------------------------
def interactive(stdin=None, stdout=None) -> bool:
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    return all(hasattr(s, "isatty") and s.isatty() for s in (stdin, stdout))


PROMPT = "[Enter] next  [b] back  [q] quit > "


def run(key, pause: bool = True, ask=input, out=None) -> dict:
    """Show lesson `key` step by step; -> the lesson's namespace (its fields and results).

    `ask(prompt)` reads a key line (tests pass a fake); EOFError or KeyboardInterrupt from it
    quits. Pausing happens only when `pause` and both stdin and stdout are terminals."""
    lesson = find(key)
    out = out or sys.stdout
    pause = pause and interactive(stdout=out)
    width = output_width(out)
    steps = lesson.steps()
    namespace = {"__name__": "__lesson__", "__file__": str(lesson.path)}
    shown: list[str] = []       # each step's screen, once it has run
    k = 0
    while k < len(steps):
        if k == len(shown):
            output = run_step(steps[k], namespace, lesson.path) if steps[k].code else ""
            shown.append(screen(lesson, k, len(steps), steps[k], output, width))
        out.write(shown[k])
        out.flush()
        if not pause or k == len(steps) - 1:
            k += 1
            continue
        try:
            answer = ask(PROMPT).strip().lower()
        except (EOFError, KeyboardInterrupt):
            out.write("\n")
            return namespace
        if answer in ("q", "quit"):
            return namespace
        k = max(0, k - 1) if answer in ("b", "back") else k + 1
    out.write("\n" + next_lesson_line(lesson) + "\n")
    return namespace


def next_lesson_line(lesson: Lesson) -> str:
    later = [other for other in all_lessons() if other.number > lesson.number]
    if not later:
        return "That was the last lesson. `tinyad lessons` lists them all."
    after = later[0]
    return f"Next: tinyad lesson {after.number}  ({after.title})"


def listing(width: int | None = None) -> str:
    """One row a lesson; a title too long for the line continues under itself."""
    lessons = all_lessons()
    name_width = max(len(lesson.name) for lesson in lessons)
    indent = " " * (2 + 2 + 2 + name_width + 2)
    rows = [textwrap.fill(f"  {lesson.number:>2}  {lesson.name:<{name_width}}  {lesson.title}",
                          width or output_width(), subsequent_indent=indent,
                          break_long_words=False)
            for lesson in lessons]
    return "\n".join([*rows, "", "step through one with: tinyad lesson N (or its name)"])
