"""The corpus of mistaken programs (tests/mistakes/): each one ends in a clear tinyad error.

Each file in tests/mistakes/ is a small program with one mistake. Its header says what it must
raise, `# expect: ErrorClass: fragment of the message` (or `# expect: warning: fragment` for
a mistake that has legitimate uses, reported and run on), and may say `# modes: fast-debug`: a
run-time mistake that fast mode catches only under `ti.init(debug=True)` (README, "Mistakes and
errors"). The line the error must name carries the marker `# <- error`.

Every program runs in each mode (tests/conftest.py) as `tinyad run` would run it, and its error
must: be of the expected tinyad class (never an internal error), name this file and the marked
line, contain the fragment, offer a hint (or a rule report's fix), and show no Python
internals (`AttributeError`, `KeyError`, `IndexError`, `TypeError:`, `NoneType`).
"""
import re
import runpy
from pathlib import Path

import pytest

import tinyad as ti

CORPUS = sorted((Path(__file__).parent / "mistakes").glob("[0-9][0-9][0-9]_*.py"))
INTERNALS = re.compile(r"(?<![A-Za-z])(AttributeError|KeyError|IndexError|TypeError:|NoneType)")


def header(path: Path) -> dict:
    """The `# key: value` lines at the top of a corpus program."""
    out = {}
    for line in path.read_text().splitlines():
        match = re.match(r"# (\w+): (.*)", line)
        if not match:
            break
        out[match.group(1)] = match.group(2).strip()
    return out


def marked_line(path: Path) -> int:
    lines = [n for n, text in enumerate(path.read_text().splitlines(), 1) if "# <- error" in text]
    assert len(lines) == 1, f"{path.name} needs exactly one `# <- error` marker"
    return lines[0]


def run_mistake(path: Path, mode: str, monkeypatch) -> BaseException:
    """Run the program as `tinyad run` does; -> the exception it ends in."""
    debug = mode == "fast" and header(path).get("modes") == "fast-debug"
    monkeypatch.setenv("TINYAD_MODE", mode)      # what a second ti.init() in the program reads
    ti.init(mode=mode, debug=debug)
    with pytest.raises(Exception) as info:  # noqa: PT011  (any class: checked below)
        runpy.run_path(str(path), run_name="__main__")
    return info.value


def test_the_corpus_is_large_and_well_formed():
    assert len(CORPUS) >= 80
    for path in CORPUS:
        assert ": " in header(path).get("expect", ""), f"{path.name} has no `# expect:` line"
        marked_line(path)


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_each_mistake_gets_a_clear_error_at_its_line(path, mode, monkeypatch, capfd):
    expected_class, fragment = header(path)["expect"].split(": ", 1)
    if expected_class == "warning":
        ti.init(mode=mode)
        monkeypatch.setenv("TINYAD_MODE", mode)
        runpy.run_path(str(path), run_name="__main__")
        text = capfd.readouterr().err
        assert fragment in text, text
        assert f"{path.name}:{marked_line(path)}" in text, text
        assert not INTERNALS.search(text), text
        return
    error = run_mistake(path, mode, monkeypatch)
    text = str(error)
    assert isinstance(error, ti.TinyadError), f"{type(error).__name__}: {text}"
    assert not isinstance(error, ti.TinyadInternalError), text
    assert isinstance(error, getattr(ti, expected_class)), \
        f"expected {expected_class}, got {type(error).__name__}: {text}"
    assert fragment in text, text
    assert error.loc is not None, text
    assert (Path(error.loc.file), error.loc.line) == (path, marked_line(path)), text
    assert f"line {error.loc.line}" in text or f"{path.name}:{error.loc.line}" in text, text
    report = getattr(error, "report", None)
    assert error.hint or (report is not None and report.fix), f"no hint: {text}"
    assert not INTERNALS.search(text), text
