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
not raise part way; a rule error or a Python exception inside a Tape can stop it between
launches). The next Tape starts clean either way.
"""
from __future__ import annotations

import contextvars

from tinyad.core import ir
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


def written_fields(kernel_ir: ir.Kernel) -> tuple:
    """The fields a kernel variant stores or applies atomics to."""
    seen: dict[int, object] = {}
    for stmt in ir.walk_stmts(kernel_ir.body):
        if isinstance(stmt, (ir.Store, ir.AtomicOp)):
            seen.setdefault(id(stmt.field), stmt.field)
    return tuple(seen.values())


def run_undoable(written: tuple, run):
    """Run one launch: its written fields saved in the Tape's log, or, where the launch can
    fail part way, in a log of its own that is restored if it does."""
    tape_log = active_undo.get()
    if tape_log is not None:
        tape_log.save(written)
        return run()
    if not runtime.backend.launches_can_fail:
        return run()
    log = UndoLog()
    log.save(written)
    try:
        return run()
    except BaseException:
        log.restore()
        raise
