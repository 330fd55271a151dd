"""A tinyad error's traceback shows the user's frames only, under plain `python prog.py` too.

A TinyadError names the user's line itself, but Python's traceback of it begins, after the
user's call, with the frames of tinyad's launch path (kernel.py's `_surface`). `install()`,
run when tinyad is imported, sets a `sys.excepthook` that leaves tinyad's own frames out of a
TinyadError's traceback; anything else, an internal error included (its frames are the bug
report), goes to the hook that was there. It steps aside for a program or shell (IPython) that
set its own hook, and TINYAD_TRACEBACK=full keeps every frame. `tinyad run` prints tracebacks
with the same filter (tinyad/cli.py).
"""
from __future__ import annotations

import os
import sys
import traceback

from tinyad.core.errors import TinyadError, TinyadInternalError

# tinyad's source folders (interp/ and compile/ beside tinyad/ in a checkout, inside it when
# installed as tinyad.interp and tinyad.compile)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTERNAL_DIRS = tuple(os.path.join(_ROOT, name, "") for name in ("tinyad", "interp", "compile"))


def is_internal(filename: str) -> bool:
    return os.path.abspath(filename).startswith(INTERNAL_DIRS)


def install() -> None:
    if sys.excepthook is sys.__excepthook__ and os.environ.get("TINYAD_TRACEBACK") != "full":
        sys.excepthook = _user_frames_only


def _user_frames_only(kind, value, tb) -> None:
    if not isinstance(value, TinyadError) or isinstance(value, TinyadInternalError):
        sys.__excepthook__(kind, value, tb)
        return
    report = traceback.TracebackException(kind, value, tb)
    report.stack = traceback.StackSummary.from_list(
        [frame for frame in report.stack if not is_internal(frame.filename)])
    print("".join(report.format()), end="", file=sys.stderr)
