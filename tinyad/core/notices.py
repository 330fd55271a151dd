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


def wrapped_for_stderr(line: str) -> str:
    """`line` as is in a pipe; in a terminal wrapped at its width between words, later lines
    indented."""
    if not sys.stderr.isatty():
        return line
    return textwrap.fill(line, shutil.get_terminal_size().columns, subsequent_indent="  ",
                         break_long_words=False, break_on_hyphens=False)
