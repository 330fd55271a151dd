"""One kernel launch, written once for every backend: the rule checks before and after one run
of the backend's program, per variant.

    run(backend, traced, variant, scalars)              (TracedKernel.launch calls it)
      backend.launching(traced, variant)                fast mode: compiles adjoints ahead
      program = traced.program(variant, backend)        prepared on first use
      no checker: program.run(scalars, backend.rng)
      else: VARIANTS[variant](backend, traced, ...)     with a CheckedLaunch: the
            checks before, launch.run_...(), the checks after

The steps of a checked launch are the same for every backend (tinyad/checkedlaunch.py): the
launch's regions planned, its in-launch hazards decided before it runs, and only what its IR
leaves open recorded, by the kernel's recording variant, which the backend runs as any other
kernel. A new variant is one more row of VARIANTS, for every backend at once.

Each variant's sequence is one function, its steps written out in order (no table of steps
called one by one): a checked launch of a small kernel costs mostly this bookkeeping, and a
call or an attribute per step counts (benchmarks/side_by_side.py).
"""
from __future__ import annotations

import time

from tinyad.check import adjoints as adjointchecks
from tinyad.check import forward as forwardchecks
from tinyad.check import nonfinite
from tinyad.check.facts import analyse, kernel_facts
from tinyad.checkedlaunch import CheckedLaunch

_new = object.__new__


def run(backend, traced, variant: str, scalars, record=None, manual: bool = True):
    """Launch `traced`'s `variant` on `backend` with these scalar arguments; -> (the kernel's
    return value, the checker's record of this launch or None). For an adjoint, `record` is the
    record of the primal launch it undoes (None: found by its arguments), and `manual` says the
    user called kernel.grad() rather than the Tape."""
    backend.launching(traced, variant)
    program = traced.program(variant, backend)
    if backend.progress is not None:
        return _timed(backend, traced, variant, program, scalars, record, manual)
    if backend.checker is None:
        return program.run(scalars, backend.rng), None
    return VARIANTS[variant](backend, traced, program, scalars, record, manual)


def _timed(backend, traced, variant, program, scalars, record, manual):
    """The launch, its checks included, timed for the backend's progress (the program is
    prepared already: only the launch counts)."""
    start = time.perf_counter()
    try:
        if backend.checker is None:
            return program.run(scalars, backend.rng), None
        return VARIANTS[variant](backend, traced, program, scalars, record, manual)
    finally:
        backend.progress.launched(traced, time.perf_counter() - start, variant)


# ---- each variant's checked launch: (backend, traced, program, scalars, record, manual) ->
# (the kernel's return value, the checker's record of the launch where a Tape keeps it)

def _forward(backend, traced, program, scalars, record, manual):
    """A forward (primal) launch (`record`, `manual`: an adjoint's, unused here)."""
    launch = _new(CheckedLaunch)    # (its fields set here: no __init__ frame, and
    checker = launch.checker = backend.checker      # one statement each: no tuple built)
    launch.backend = backend
    launch.traced = traced
    launch.scalars = scalars
    launch.program = program
    facts = launch.facts = traced.memos[analyse]    # (kernel_facts(traced), one call less)
    names, rows = launch.plan_forward()
    forwardchecks.before_forward(checker, traced, names, scalars, rows, facts)
    record = launch.record = checker.new_launch(traced, scalars, facts)
    if not facts.grads_stored:      # (the usual: a kernel storing into no gradient)
        return launch.run_forward(), record     # (its checks around the run; a
        # hand-written gradient kernel's, tinyad/check/handgrads.py, inside)
    forwardchecks.clear_zeroed_gradients(checker, traced)    # (before their primals' copies)
    result = launch.run_forward()
    forwardchecks.note_zeroed_gradients(checker, traced, backend.storage.to_host)
    return result, record


def _adjoint(backend, traced, program, scalars, record, manual):
    """An adjoint launch, of the forward launch `record` (None: found by its arguments);
    `manual`: the user called kernel.grad(), not the Tape."""
    checker = backend.checker
    if manual or record is None or record.problems or not record.tape or record.repeats:
        return _adjoint_with_more(backend, traced, program, scalars, record, manual)
    # The usual: a Tape's adjoint of its own launch, which left no problem to report and
    # stands for no other launch (a recompute's): no checks before it but its replay's
    result = CheckedLaunch.run_adjoint(backend, traced, program, scalars, record)
    adjointchecks.after_adjoint(checker, traced, record, None)     # (None: of a Tape's own)
    if checker.checks_nonfinite:
        # (in a Tape's backward that can run again the launch is only noted, as
        # nonfinite.after_launch would: its gradients are looked at once the pass ends)
        batch = checker.nonfinite_batch
        if checker.nonfinite_batching and batch is not None:
            batch.kernels.append(traced)
        else:
            nonfinite.after_launch(checker, traced, "adjoint", scalars, record, backend)
    return result, None


def _adjoint_with_more(backend, traced, program, scalars, record, manual):
    """_adjoint's launch with the checks before it: a manual .grad() (its record found by its
    arguments where not given), or the problems its forward launch left to report."""
    checker, steps = backend.checker, CheckedLaunch    # (its static steps: no object)
    if record is None:
        record = checker.find_launch(traced, scalars)
        if record is None:
            steps.unmatched_adjoint(backend, traced, scalars)
    if manual or record is not None and record.problems:
        adjointchecks.before_adjoint(checker, traced, traced.ir.name, record, manual)
    result = steps.run_adjoint(backend, traced, program, scalars, record)
    adjointchecks.after_adjoint(checker, traced, record, manual)
    if checker.checks_nonfinite:
        nonfinite.after_launch(checker, traced, "adjoint", scalars, record, backend)
    return result, None


def _tangent(backend, traced, program, scalars, record, manual):
    """A tangent (forward-mode) launch."""
    # Forward mode replays nothing, so no read can go stale (no Rule 1 or 2): the one way to
    # lose a tangent is a store into a field without .dual.
    launch = _new(CheckedLaunch)
    checker = launch.checker = backend.checker
    launch.backend, launch.traced, launch.scalars, launch.program = (
        backend, traced, scalars, program)
    launch.facts, launch.record = kernel_facts(traced), None
    forwardchecks.before_tangent(checker, traced, traced.ir.name)
    launch.before_tangent_writes()
    result = program.run(scalars, backend.rng)
    launch.after_tangent()
    if checker.checks_nonfinite:
        nonfinite.after_launch(checker, traced, "tangent", scalars, None, backend)
    return result, None


def _adjoint_tangent(backend, traced, program, scalars, record, manual):
    """Forward over reverse: the tangent of the adjoint. Its Rule 1 and 2 checks are the plain
    Tape's (ti.ad.hvp runs one first); here, the tangents it could drop."""
    forwardchecks.before_tangent(backend.checker, traced, traced.ir.name,
                                 traced.dropped_adjoint_tangents)
    return program.run(scalars, backend.rng), None


# Each variant's checked launch (a variant's IR is derived as TracedKernel.DERIVED says, in
# tinyad/kernel.py)
VARIANTS = {
    "primal": _forward,
    "adjoint": _adjoint,
    "tangent": _tangent,
    "adjoint_tangent": _adjoint_tangent,
}
