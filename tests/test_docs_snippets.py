"""Every snippet in README.md and docs/*.md runs, and does what the page says it does.

The fenced blocks are read from the pages; HTML comments on the lines just before a block (or,
for `output`, just after it) say what to expect of it:

    ```python      written to a file and run in a fresh process (kernels need a source file);
                   each snippet is whole: it imports tinyad and calls ti.init itself. It must
                   end without an exception, unless
                   <!-- expect: NameOfError -->   it must raise that error (a class of that
                                                  name in the exception's MRO), and
                   <!-- output: some text -->     (after the block) its stdout must contain it.
    ```console     lines starting with `$ ` are commands, run in the repository root with this
                   Python (`tinyad ...` as `python -m tinyad.cli ...`); the other lines are
                   output: each must appear in the command's stdout+stderr, in order, `...`
                   standing for lines left out. Exit status 0, or <!-- exit: N -->.
    ```bash        every line (comments stripped) is a command, run as above; exit status 0.
    ```text        shown output or IR: not run.
    <!-- skip: why -->             before a block: not run (an install, the test suite itself,
                                   a GPU); the reason is required.
    <!-- profile: full -->         run only with TINYAD_TEST_PROFILE=full (a long compile).

A block in any other language, or with no language, fails the test: every snippet is either
run or says why not.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGUAGES = ("python", "console", "bash")
SHOWN_LANGUAGES = ("text",)
MARKER = re.compile(r"<!--\s*(expect|output|skip|profile|exit):\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass
class Snippet:
    page: str
    line: int
    language: str
    code: str
    marks: dict[str, list[str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    def mark(self, key: str) -> str | None:
        values = self.marks.get(key)
        return values[0] if values else None


def _marks(lines: list[str]) -> dict[str, list[str]]:
    marks: dict[str, list[str]] = {}
    for line in lines:
        for key, value in MARKER.findall(line):
            marks.setdefault(key, []).append(value)
    return marks


def _comment_lines(lines: list[str], start: int, step: int) -> list[str]:
    """The run of HTML-comment lines next to a fence, walking from `start` by `step`."""
    found = []
    index = start
    while 0 <= index < len(lines) and lines[index].strip().startswith("<!--"):
        found.append(lines[index])
        index += step
    return found


def snippets(path: Path) -> list[Snippet]:
    lines = path.read_text().splitlines()
    found, index = [], 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        before = _comment_lines(lines, index - 1, -1)
        after = _comment_lines(lines, end + 1, 1)
        marks = _marks(before)
        for key, values in _marks(after).items():
            if key == "output":
                marks.setdefault(key, []).extend(values)
        page = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
        found.append(Snippet(page, index + 1, match.group(1),
                             "\n".join(lines[index + 1:end]) + "\n", marks))
        index = end + 1
    return found


ALL = [s for page in PAGES for s in snippets(page)]
RUN = [s for s in ALL if s.language in RUN_LANGUAGES and s.mark("skip") is None]


def test_the_pages_have_snippets_and_each_is_run_or_says_why_not():
    assert len(RUN) >= 10, [s.name for s in RUN]
    for snippet in ALL:
        assert snippet.language in RUN_LANGUAGES + SHOWN_LANGUAGES, (
            f"{snippet.name}: a ```{snippet.language} block: use python, console, bash or text")
        skip = snippet.mark("skip")
        assert skip is None or skip.strip(), f"{snippet.name}: a skip marker needs a reason"


def test_the_snippet_reader_reads_markers_before_and_after_a_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- expect: ValueError -->\n```python\nraise ValueError\n```\n"
                    "<!-- output: hi -->\n\n<!-- skip: an install -->\n```bash\npip x\n```\n")
    first, second = snippets(page)
    assert first.mark("expect") == "ValueError" and first.marks["output"] == ["hi"]
    assert first.code == "raise ValueError\n" and second.mark("skip") == "an install"


def _env() -> dict:
    env = dict(os.environ)
    env.pop("TINYAD_MODE", None)      # each snippet chooses its mode with ti.init
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.setdefault("COLUMNS", "100")
    env["PYTHONUNBUFFERED"] = "1"     # a console block's output interleaves as in a terminal
    return env


def _command(line: str) -> str:
    if line.startswith("tinyad "):
        line = f'"{sys.executable}" -m tinyad.cli {line[len("tinyad "):]}'
    return line


# The runner of a python snippet: raises what the snippet raised, and names its class chain on
# stderr so the test can match an expected error by any of its classes' names.
RUNNER = """
import runpy, sys, traceback
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
except BaseException as error:
    names = [cls.__name__ for cls in type(error).__mro__]
    print("SNIPPET-RAISED " + " ".join(names), file=sys.stderr)
    traceback.print_exc()
    sys.exit(3)
"""


def _run_python(snippet: Snippet, tmp_path: Path) -> subprocess.CompletedProcess:
    program = tmp_path / "snippet.py"
    program.write_text(snippet.code)
    return subprocess.run([sys.executable, "-c", RUNNER, str(program)], check=False,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=_env())


def _check_python(snippet: Snippet, tmp_path: Path) -> None:
    proc = _run_python(snippet, tmp_path)
    expected = snippet.mark("expect")
    raised = re.search(r"^SNIPPET-RAISED (.*)$", proc.stderr, re.MULTILINE)
    if expected:
        assert raised and expected in raised.group(1).split(), (
            f"{snippet.name} should raise {expected}:\n{proc.stdout}\n{proc.stderr}")
    else:
        assert proc.returncode == 0, f"{snippet.name} failed:\n{proc.stdout}\n{proc.stderr}"
    for text in snippet.marks.get("output", []):
        assert text in proc.stdout, f"{snippet.name}: {text!r} not in its output:\n{proc.stdout}"


def _expect_lines_in_order(name: str, expected: list[str], output: str) -> None:
    got = [line.strip() for line in output.splitlines()]
    position = 0
    for line in expected:
        want = line.strip()
        if not want or want == "...":
            continue
        try:
            position = got.index(want, position) + 1
        except ValueError:
            pytest.fail(f"{name}: {want!r} not in the output (in order):\n{output}")


def _check_shell(snippet: Snippet) -> None:
    status = int(snippet.mark("exit") or 0)
    commands: list[tuple[str, list[str]]] = []
    for line in snippet.code.splitlines():
        if snippet.language == "console":
            if line.startswith("$ "):
                commands.append((line[2:], []))
            elif commands:
                commands[-1][1].append(line)
        elif line.split("#")[0].strip():
            commands.append((line.split("  #")[0].strip(), []))
    assert commands, f"{snippet.name}: no command"
    for command, expected in commands:
        proc = subprocess.run(_command(command), shell=True, check=False, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=300, cwd=ROOT,
                              env=_env())
        output = proc.stdout
        assert proc.returncode == status, f"{snippet.name}: `{command}` exit {proc.returncode}:\n{output}"
        _expect_lines_in_order(snippet.name, expected, output)


@pytest.mark.parametrize("snippet", RUN, ids=[s.name for s in RUN])
def test_snippet(snippet: Snippet, tmp_path):
    if snippet.mark("profile") == "full" and os.environ.get("TINYAD_TEST_PROFILE") != "full":
        pytest.skip("long compile: runs in the full profile (TINYAD_TEST_PROFILE=full)")
    if snippet.language == "python":
        _check_python(snippet, tmp_path)
    else:
        _check_shell(snippet)


def test_a_snippet_that_does_not_do_what_its_page_says_fails(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- expect: ZeroDivisionError -->\n```python\nx = 1\n```\n\n"
                    "```python\nprint('hello')\n```\n<!-- output: goodbye -->\n\n"
                    "```console\n$ echo one\ntwo\n```\n")
    quiet, wrong_output, wrong_console = snippets(page)
    with pytest.raises(AssertionError, match="should raise ZeroDivisionError"):
        _check_python(quiet, tmp_path)
    with pytest.raises(AssertionError, match="'goodbye' not in its output"):
        _check_python(wrong_output, tmp_path)
    with pytest.raises(pytest.fail.Exception, match="'two' not in the output"):
        _check_shell(wrong_console)
    page.write_text("<!-- expect: ZeroDivisionError -->\n```python\n1 / 0\n```\n")
    _check_python(snippets(page)[0], tmp_path)       # the clean twin: raises as its page says


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return {_anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def _check_links(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: the link {target} leads to no file"
        if anchor and resolved.suffix == ".md":
            assert anchor in _anchors(resolved), f"{page.name}: {target}: no such heading"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_link_of_the_pages_leads_somewhere(page):
    _check_links(page)


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# One\n[ok](#one) [gone](other.md)\n")
    with pytest.raises(AssertionError, match="leads to no file"):
        _check_links(page)
    page.write_text("# One\n[ok](#one) [gone](#two)\n")
    with pytest.raises(AssertionError, match="no such heading"):
        _check_links(page)


def test_the_anchor_of_a_heading_is_githubs():
    assert _anchor(" `tinyad run` and `tinyad check`") == "tinyad-run-and-tinyad-check"
    assert _anchor(" Fast mode: the same rules at compiled speed") == (
        "fast-mode-the-same-rules-at-compiled-speed")
    assert _anchor(" Taichi's layouts and gradients") == "taichis-layouts-and-gradients"
