"""Notices to the user on stderr, from any layer above the core (Taichi prints these as [Taichi]
lines): one line in a pipe, and in a terminal wrapped at its width between words (the terminal
itself would cut words in two). The core raises or returns; it never prints."""
from __future__ import annotations

import sys

from tinyad.core.errors import wrapped_for_stderr


def note(message: str) -> None:
    """Print `[tinyad] message` on stderr."""
    print(wrapped_for_stderr(f"[tinyad] {message}"), file=sys.stderr)
