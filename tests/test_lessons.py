"""The lessons run start to finish (as `tinyad lesson N --no-pause` does) and show what they
say they show."""
import re

from tinyad import lessons


def run_lesson(number, capsys):
    lessons.run(number, pause=False)
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_there_are_lessons():
    assert [p.stem[:2] for p in lessons.lesson_files()] == ["01", "02"]


def test_lesson_1_reverse_mode(capsys):
    out = run_lesson(1, capsys)
    assert "kernel energy_grad():" in out and "restore v" in out
    rows = re.findall(r"autodiff ([+-][\d.]+)\s+formula .* = ([+-][\d.]+)", out)
    assert len(rows) == 3 and all(a == b for a, b in rows)


def test_lesson_2_silent_wrong_gradients(capsys):
    out = run_lesson(2, capsys)
    assert "Global Data Access Rule 1" in out and "Parallel loop conflict" in out
    assert "x.grad[1] = 10.0" in out          # the fixed kernel
    assert "th.grad = 1.9921875" in out       # the serialized recurrence
