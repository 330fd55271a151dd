"""Fixed-width tables that fit the terminal: a row too wide for it folds in two.

Every table here has key columns (workload, size, mode) and measured columns. On a wide terminal,
or when the output is a file, each row is one line. On a narrow one (the 80 columns of a default
terminal, where a 130-column row wrapped mid-number), the key goes on one line and the measures
on the next, indented; an error message wraps between words.
"""
from __future__ import annotations

import shutil
import sys
import textwrap

INDENT = "  "


def output_width() -> int | None:
    """The terminal's width ($COLUMNS where set); None (no limit) when the output is not a
    terminal, so that a file or a pipe gets one line per row."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def fit(head: tuple[str, str], rows: list[tuple[str, str]], width: int | None = None,
        title: str = "") -> list:
    """The lines of a table whose header and rows are (key, measures) pairs of padded text,
    under `title` (wrapped between words to the width)."""
    width = output_width() if width is None else width
    above = textwrap.wrap(title, width - 1) if title and width else [title] if title else []
    one_line = [key + measures for key, measures in [head, *rows]]
    if width is None or max(map(len, one_line)) < width:
        return [*above, one_line[0], "-" * len(one_line[0]), *one_line[1:]]
    lines = [*above, head[0].rstrip(), INDENT + head[1], "-" * (width - 1)]
    for key, measures in rows:
        lines.append(key.rstrip())
        if measures.startswith("error"):
            lines += textwrap.wrap(measures, width - 1, initial_indent=INDENT,
                                   subsequent_indent=INDENT * 2)
        else:
            lines.append(INDENT + measures)
    return lines
