"""One kernel launch, written once for every backend: the rule checks before and after one run
of the backend's program, per variant.

    run(backend, traced, variant, scalars)              (TracedKernel.launch calls it)
      backend.launching(traced, variant)                fast mode: compiles adjoints ahead
      program = traced.program(variant, backend)        prepared on first use
      no checker: program.run(scalars, backend.rng)
      else: launch = backend.CheckedLaunch(...)         VARIANTS[variant]:
            before(launch); launch.run_...(); after(launch)

A backend takes the steps where backends genuinely differ its own way, as methods of its
CheckedLaunch (tinyad/backend.py): interp mode logs every access as the program runs
(interp/backend.py); fast mode plans the launch's regions, decides its in-launch hazards
before it runs and records only what its IR leaves open (compile/checkedlaunch.py). A new
variant is one more row of VARIANTS, for every backend at once.
"""
from __future__ import annotations

import time
from typing import NamedTuple

from tinyad.check import adjoints as adjointchecks
from tinyad.check import forward as forwardchecks
from tinyad.check import handgrads, nonfinite
from tinyad.check.facts import kernel_facts


class Steps(NamedTuple):
    before: object      # launch -> None: the checks before the run
    run: object         # the CheckedLaunch method that runs the program (its name, in VARIANTS)
    after: object       # launch -> None: the checks after it
    makes_record: bool  # the launch returns the checker's record of it (a Tape keeps it)


class _ByClass(dict):
    """CheckedLaunch class -> {variant: its Steps, with `run` that class's own function}: the
    run is called as a plain function (no lookup by name, no bound method, per launch)."""

    def __missing__(self, cls):
        made = self[cls] = {variant: steps._replace(run=getattr(cls, steps.run))
                            for variant, steps in VARIANTS.items()}
        return made


_BY_CLASS = _ByClass()
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
    return _checked(backend, traced, variant, program, scalars, record, manual)


def _checked(backend, traced, variant, program, scalars, record, manual):
    """The checked launch: the variant's steps before and after the program's run."""
    cls = backend.CheckedLaunch
    before, run_program, after, makes_record = _BY_CLASS[cls][variant]
    launch = _new(cls)       # (its fields set here, with no __init__ frame: CheckedLaunch)
    launch.backend, launch.checker, launch.traced, launch.scalars = (
        backend, backend.checker, traced, scalars)
    launch.program, launch.record, launch.manual, launch.hand = program, record, manual, None
    before(launch)
    result = run_program(launch)
    after(launch)
    return result, (launch.record if makes_record else None)


def _timed(backend, traced, variant, program, scalars, record, manual):
    """The launch, its checks included, timed for the backend's progress (the program is
    prepared already: only the launch counts)."""
    start = time.perf_counter()
    try:
        if backend.checker is None:
            return program.run(scalars, backend.rng), None
        return _checked(backend, traced, variant, program, scalars, record, manual)
    finally:
        backend.progress.launched(traced, time.perf_counter() - start, variant)


# ---- a forward (primal) launch ----------------------------------------------------------------

def _before_forward(launch) -> None:
    checker, traced, scalars = launch.checker, launch.traced, launch.scalars
    launch.facts = kernel_facts(traced)
    names, rows = launch.plan_forward()
    forwardchecks.before_forward(checker, traced, traced.ir.name, names, scalars, rows,
                                 launch.facts)
    launch.record = checker.new_launch(traced.ir.name, traced, scalars, launch.facts)
    if launch.facts.grads_stored:     # (before their primals' copies)
        forwardchecks.clear_zeroed_gradients(checker, traced)
    launch.before_forward_run()
    if launch.facts.hand_gradient:       # (most kernels are not: no call for them)
        launch.hand = handgrads.before_launch(checker, traced, launch.record.number,
                                              launch.backend.storage, launch.adjoint_unchecked)


def _after_forward(launch) -> None:
    storage = launch.backend.storage
    if launch.hand is not None:
        handgrads.after_launch(launch.checker, launch.hand, storage)
    launch.after_forward()
    if launch.facts.grads_stored:
        forwardchecks.note_zeroed_gradients(launch.checker, launch.traced, storage.to_host)


# ---- an adjoint launch ------------------------------------------------------------------------

def _before_adjoint(launch) -> None:
    checker, traced = launch.checker, launch.traced
    if launch.record is None:
        launch.record = checker.find_launch(traced, launch.scalars)
        if launch.record is None:
            launch.unmatched_adjoint()
    adjointchecks.before_adjoint(checker, traced, traced.ir.name, launch.record, launch.manual)


def _after_adjoint(launch) -> None:
    checker, traced = launch.checker, launch.traced
    adjointchecks.after_adjoint(checker, traced, launch.record, launch.manual)
    nonfinite.after_launch(checker, traced, "adjoint", launch.scalars, launch.record,
                           launch.backend)


# ---- a tangent (forward-mode) launch, and the tangent of an adjoint ---------------------------

def _before_tangent(launch) -> None:
    # Forward mode replays nothing, so no read can go stale (no Rule 1 or 2): the one way to
    # lose a tangent is a store into a field without .dual.
    launch.facts = kernel_facts(launch.traced)
    forwardchecks.before_tangent(launch.checker, launch.traced, launch.traced.ir.name)
    launch.before_tangent_writes()


def _after_tangent(launch) -> None:
    launch.after_tangent()
    nonfinite.after_launch(launch.checker, launch.traced, "tangent", launch.scalars, None,
                           launch.backend)


def _nothing(launch) -> None:
    """No check after the run."""


def _before_adjoint_tangent(launch) -> None:
    # Forward over reverse: the tangent of the adjoint. Its Rule 1 and 2 checks are the plain
    # Tape's (ti.ad.hvp runs one first); here, the tangents it could drop.
    traced = launch.traced
    forwardchecks.before_tangent(launch.checker, traced, traced.ir.name,
                                 traced.dropped_adjoint_tangents)


# Each variant's checks around one run of the backend's program (a variant's IR is derived as
# TracedKernel.DERIVED says, in tinyad/kernel.py).
VARIANTS = {
    "primal": Steps(_before_forward, "run_forward", _after_forward, True),
    "adjoint": Steps(_before_adjoint, "run_adjoint", _after_adjoint, False),
    "tangent": Steps(_before_tangent, "run", _after_tangent, False),
    "adjoint_tangent": Steps(_before_adjoint_tangent, "run", _nothing, False),
}
