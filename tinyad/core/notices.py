"""Notices to the user on stderr, from any layer (Taichi prints these as [Taichi] lines): one
line in a pipe, and in a terminal wrapped at its width between words (the terminal itself would
cut words in two)."""
from __future__ import annotations

import shutil
import sys
import textwrap


def note(message: str) -> None:
    """Print `[tinyad] message` on stderr."""
    print(wrapped_for_stderr(f"[tinyad] {message}"), file=sys.stderr)


def wrapped_for_stderr(text: str, taken: int = 0) -> str:
    """`text` as is in a pipe; in a terminal each of its lines wrapped at the terminal's width
    between words, continuations indented two more than their line. A source location stays
    whole: its `File "..."` line, and lines indented four or more (code, carets). `taken`: the
    columns already used before the first line (an exception's `tinyad.Name: `)."""
    if not sys.stderr.isatty():
        return text
    width, out = shutil.get_terminal_size().columns, []
    for n, line in enumerate(text.splitlines()):
        if line.startswith(("    ", 'File "')):
            out.append(line)
            continue
        lead = " " * taken if n == 0 else ""
        indent = line[:len(line) - len(line.lstrip())]
        out.append(textwrap.fill(line, width, initial_indent=lead,
                                 subsequent_indent=indent + "  ", break_long_words=False,
                                 break_on_hyphens=False)[len(lead):])
    return "\n".join(out)
