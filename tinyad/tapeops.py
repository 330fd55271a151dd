"""Python-scope field operations inside a Tape: recorded and differentiated as Taichi's are.

Taichi 1.7.4 runs `copy_from`, `fill` and `from_numpy` (`to_numpy` too) as kernels
(taichi/_kernels.py: tensor_to_tensor, fill_field / field_fill_python_scope, ext_arr_to_tensor),
so a Tape records them and its backward pass runs their adjoints: a copy hands the destination's
gradient to the source and zeroes the destination's; a fill or a load from numpy zeroes the
destination's gradient (its new values are constants). tinyad does the operations at numpy speed
and records the same adjoints here, in every mode. An element write `x[i] = v` Taichi does not
record, so a gradient reaching x[i] flows on to whatever wrote x[i] earlier in the Tape, though
that value was overwritten: tinyad records it when something earlier in the Tape wrote x (or
x[i], from Python), and zeroes x.grad[i] there; setting inputs one by one inside the Tape keeps
their gradients, as in Taichi. Inside ti.ad.FwdMode a copy carries the tangent (.dual) along and the
other writes set it to zero, as the tangent kernels of Taichi's would.
"""
from __future__ import annotations

import numpy as np

from tinyad import undo
from tinyad.check import rules
from tinyad.check.facts import kernel_facts
from tinyad.runtime import active_forward_mode, active_recorder, python_storage, runtime


def _tape():
    """The Tape recording now, or None."""
    recorder = active_recorder.get()
    return recorder if getattr(recorder, "records_field_ops", False) else None


def _replayed(operation: str, dst, argument) -> None:
    """ti.ad.verify's recorder, if it is recording, takes the kernel Taichi runs for this."""
    recorder = active_recorder.get()
    if getattr(recorder, "replays_field_ops", False):
        recorder.record_field_op(operation, dst, argument)


_storage = python_storage


def _differentiated(fld) -> bool:
    grad = fld.twin_field("grad")
    return fld.role == "primal" and grad is not None and grad.is_placed


# ---- the operations, called by Field after it has done them ---------------------------------

def copied(dst, src) -> None:
    """dst.copy_from(src) has run."""
    runtime.backend.checks.python_copy(dst, src)
    if active_forward_mode.get() is not None and dst.has_dual:
        tangent = src.twin_field("dual")
        _set_dual(dst, None if tangent is None else _storage().to_host(tangent))
    tape = _tape()
    if tape is not None and src is not dst and _differentiated(dst):
        tape.record_field_op(_copy, COPY_ADJOINT, (dst, src), dst)
    _replayed("copy_from", dst, src)


def loaded(dst, array) -> None:
    """dst.from_numpy(array) has run."""
    _constant_written(dst, FROM_NUMPY_ADJOINT, _from_numpy, lambda: np.array(array, copy=True))


def filled(dst, value) -> None:
    """dst.fill(value) has run (the user's own fill, not one a Tape does)."""
    _constant_written(dst, FILL_ADJOINT, _fill, lambda: value)
    _replayed("fill", dst, value)


def gradient_read(grad, index=None) -> None:
    """Python scope read grad (x.grad[i]: `index` the storage index; x.grad.to_numpy(): None):
    the checker looks at when, and at what it held."""
    tape = _tape()
    runtime.backend.checks.gradient_read(grad, tape._loc if tape is not None else None, index)


def element_written(dst, index) -> None:
    """dst[index] = value has run (index: the storage index)."""
    if active_forward_mode.get() is not None and dst.has_dual and dst.dual.is_placed:
        _storage().set_element(dst.dual, index, 0)
    tape = _tape()
    if tape is None or not _differentiated(dst):
        return
    if tape.wrote_before(dst, index):
        value = np.array(_storage().to_host(dst)[index], copy=True)
        tape.record_field_op(_set_element, SET_ADJOINT, (dst, index, value), None)
    else:
        tape.note_set(dst, index)


def _constant_written(dst, adjoint, replay, argument) -> None:
    """dst was set to constants: its tangent is zero, and its gradient stops there."""
    if active_forward_mode.get() is not None and dst.has_dual:
        _set_dual(dst, None)
    tape = _tape()
    if tape is not None and _differentiated(dst):
        tape.record_field_op(replay, adjoint, (dst, argument()), dst)


def _set_dual(dst, values) -> None:
    if not dst.dual.is_placed:
        return
    if values is None:
        _storage().fill(dst.dual, 0)
    else:
        _storage().assign(dst.dual, values)


# ---- what a Tape's grad_check replays: the operation again ---------------------------------

def _copy(dst, src):
    dst.copy_from(src)


def _from_numpy(dst, array):
    dst.from_numpy(array)


def _fill(dst, value):
    dst.fill(value)


def _set_element(dst, index, value):
    _storage().set_element(dst, index, value)


# ---- the adjoints the Tape's backward pass runs ----------------------------------------------

class FieldOpAdjoint:
    """The adjoint of one kind of Python-scope write. The Tape calls `replay`, as it does a
    kernel's adjoint, with the arguments recorded and, in `kwargs`, where the write was: its
    user's line `loc` and the entries recorded after it (`later`)."""

    def __init__(self, name, run):
        self.__name__ = name
        self.run = run

    def replay(self, args, kwargs, launch):
        held = self.run(*args)
        if self is FROM_NUMPY_ADJOINT and held.any():
            _discarded(args[0], kwargs["loc"], kwargs["later"])


def _take_gradient(dst, index=...):
    """Zero dst.grad (at `index`) and return what it held."""
    undo.before_python_write(dst.grad)     # (a Tape that fails puts gradients back too)
    storage = _storage()
    held = np.array(storage.to_host(dst.grad)[index], copy=True)
    if index is ...:
        storage.fill(dst.grad, 0)
    else:
        storage.set_element(dst.grad, index, 0)
    return held


def _copy_adjoint(dst, src):
    held = _take_gradient(dst)
    if _differentiated(src):
        undo.before_python_write(src.grad)
        grad = _storage().to_host(src.grad)
        grad += held.astype(grad.dtype)
        _storage().invalidate(src.grad)
    return held


COPY_ADJOINT = FieldOpAdjoint("copy_from", _copy_adjoint)
FROM_NUMPY_ADJOINT = FieldOpAdjoint("from_numpy", lambda dst, array: _take_gradient(dst))
FILL_ADJOINT = FieldOpAdjoint("fill", lambda dst, value: _take_gradient(dst))
SET_ADJOINT = FieldOpAdjoint("setitem", lambda dst, index, value: _take_gradient(dst, index))


def _discarded(dst, loc, later) -> None:
    """A from_numpy inside the Tape threw away a gradient that kernels after it sent to dst:
    warn (once per line), naming the first of them that read dst."""
    checks = runtime.backend.checks
    read = next(((launch.kernel, kernel_facts(launch.compiled).first_load[dst])
                 for launch in later() if launch is not None
                 and dst in kernel_facts(launch.compiled).first_load), (None, None))
    checks.warn_once(rules.gradient_discarded_by_load(
        field=dst.name, write_loc=loc, kernel=read[0], read_loc=read[1]))
