"""Where a piece of IR came from in the user's program, and how to show it."""
from __future__ import annotations

import io
import linecache
import sys
import tokenize
from dataclasses import dataclass


@dataclass(frozen=True)
class SrcLoc:
    file: str
    line: int
    col: int = 0          # 0-based, like Python's ast
    end_col: int | None = None
    function: str = ""    # the kernel or func the line belongs to

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def text(self) -> str:
        """The source line itself, without its newline ('' when the file is gone)."""
        return linecache.getline(self.file, self.line).rstrip("\n")

    def snippet(self) -> str:
        """`File "f.py", line 3, in k` + the line + carets under the construct."""
        where = f'File "{self.file}", line {self.line}'
        if self.function:
            where += f", in {self.function}"
        text = self.text
        if not text:
            return where
        stripped = text.lstrip()
        indent = len(text) - len(stripped)
        end = self.end_col if self.end_col and self.end_col > self.col else _code_end(text)
        start = max(self.col, indent)
        carets = " " * (start - indent) + "^" * max(1, end - start)
        return f"{where}\n    {stripped}\n    {carets}"


def _code_end(text: str) -> int:
    """Where a line's code ends: before a trailing comment (a Python-scope line's carets, which
    have no end column, underline the statement, not the note after it)."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                return len(text[:token.start[1]].rstrip())
    except (tokenize.TokenError, SyntaxError):
        pass
    return len(text.rstrip())


UNKNOWN = SrcLoc("<unknown>", 0)


# Python-scope checks ask for the user's line at every launch and field write: both lookups
# below are cached per code object (a frame walk and a SrcLoc cost microseconds each). Bounded:
# a program that makes code objects without end (exec in a loop) starts the caches afresh.
_OURS: dict = {}       # code object -> is it tinyad's
_LOCS: dict = {}       # (code object, line) -> SrcLoc
_CACHE_LIMIT = 1 << 14


def user_frame(depth: int = 1):
    """The innermost stack frame outside tinyad (the user's code calling into it from Python
    scope), or None. `depth` frames above the caller are skipped first."""
    return _outside_tinyad(sys._getframe(depth + 1))


def _outside_tinyad(frame):
    """`frame`, or the first frame above it, whose code is not tinyad's (None: none)."""
    ours = _OURS
    while frame is not None:
        code = frame.f_code
        mine = ours.get(code)
        if mine is None:
            if len(ours) > _CACHE_LIMIT:
                ours.clear()
            name = frame.f_globals.get("__name__", "")
            mine = ours[code] = name == "tinyad" or name.startswith("tinyad.")
        if not mine:
            break
        frame = frame.f_back
    return frame


def user_loc(depth: int = 0) -> SrcLoc | None:
    """The user's source line calling into tinyad from Python scope (`depth`: frames above the
    caller known to be tinyad's, skipped first)."""
    # (the walk in line for code objects known already: asked at every Tape and Python write)
    frame, ours = sys._getframe(depth + 1), _OURS
    while True:
        mine = ours.get(frame.f_code)
        if mine is None:             # (a code object seen for the first time)
            frame = _outside_tinyad(frame)
            if frame is None:
                return None
            break
        if not mine:
            break
        frame = frame.f_back
        if frame is None:
            return None
    code = frame.f_code
    key = (code, frame.f_lineno)
    loc = _LOCS.get(key)
    if loc is None:
        if len(_LOCS) > _CACHE_LIMIT:
            _LOCS.clear()
        loc = _LOCS[key] = SrcLoc(code.co_filename, frame.f_lineno, 0, None, code.co_name)
    return loc
