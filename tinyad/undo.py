"""Nothing lost on failure: copies of fields taken just before they first change, put back
when a launch or a Tape fails.

A launch that raises part way (a bounds error, a rule error, Ctrl-C in a runaway `while`) has
written some elements and not others, so the program's state is neither the one before nor the
one after. The user fixes the mistake and runs again from a state that never existed. So:

* a launch saves the fields its IR writes and, if it raises, puts them back;
* a Tape saves every field the first time anything inside it changes the field (its launches,
  Python-scope writes, the gradients it clears on entry) and, if it raises (in the recorded code
  or in the backward pass), puts them all back, gradients included.

Both hold where launches are checked: interp mode, and fast mode with `debug=True`. A copy costs
a pass over the field, as much as a memory-bound compiled kernel: fast mode without `debug=True`
copies nothing, so a failure there leaves the fields as the failure found them (its kernels do
not raise part way; a bad index the IR cannot bound is reported when the launch returns, after
it ran with that access sent to the field's element 0, compile/badindex.py; a rule error or a
Python exception inside a Tape can stop it between launches). The next Tape starts clean
either way.
"""
from __future__ import annotations

import contextvars

from tinyad.runtime import runtime


class UndoLog:
    """Saved copies of fields, taken before their first change, to restore on failure."""

    def __init__(self):
        self._saved: dict[int, tuple] = {}     # id(field) -> (field, its values before)

    def save(self, fields) -> None:
        storage = runtime.backend.storage
        for f in fields:
            if id(f) not in self._saved and f.is_placed:
                self._saved[id(f)] = (f, storage.snapshot(f))

    def restore(self) -> None:
        storage = runtime.backend.storage
        for f, values in self._saved.values():
            storage.restore(f, values)
        self._saved.clear()


# The undo log of the Tape that is recording, if any.
active_undo: contextvars.ContextVar = contextvars.ContextVar("tinyad_undo", default=None)


def before_python_write(fld) -> None:
    """A Python-scope write to `fld` is about to happen (inside a Tape it can be undone)."""
    log = active_undo.get()
    if log is not None:
        log.save((fld,))


def run_undoable(written, tape_log: UndoLog | None, run):
    """Run one launch that writes the fields `written`: saved first in the recording Tape's
    log, or else in a log of its own that is restored if the launch raises part way."""
    if tape_log is not None:
        tape_log.save(written)
        return run()
    log = UndoLog()
    log.save(written)
    try:
        return run()
    except BaseException:
        log.restore()
        raise
