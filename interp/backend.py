"""Interp mode as a backend (tinyad/backend.py): the tree-walking interpreter, with the autodiff
rule checker around every launch.

The checker lives here: the access log (interp/accesslog.py) sees every load and store a launch
makes, and the launch checks (tinyad/check/launches.py, shared with fast mode) run before and
after each launch. Fields stay in host numpy arrays, the default storage.
"""
from __future__ import annotations

import functools
import time

from tinyad.backend import NO_CHECKS, Backend, CheckerHooks
from tinyad.check import adjoints as adjointchecks
from tinyad.check import forward as forwardchecks
from tinyad.check import handgrads, nonfinite
from tinyad.check.facts import kernel_facts
from tinyad.check.rows import launch_rows
from tinyad.check.zeroing import gradient_resets
from tinyad.interp import lanelog  # noqa: F401  (gives the checked memories their lane form)
from tinyad.interp.accesslog import Checker, LoggedMemory, ReplayMemory
from tinyad.interp.evaluator import Program
from tinyad.interp.nanwatch import locate
from tinyad.interp.progress import Progress


class InterpBackend(Backend):
    name = "interp"

    def __init__(self, config, rng):
        super().__init__(config, rng)
        self.checker = Checker(config.check) if config.check != "off" else None
        self.checks = CheckerHooks(self.checker) if self.checker is not None else NO_CHECKS
        if self.checker is not None:
            self.checker.checks_nonfinite = config.check_nonfinite
        self.progress = Progress()

    def prepare(self, kernel_ir) -> Program:
        return Program(kernel_ir)

    def launch(self, traced, variant, scalars, record=None, manual=True):
        program = traced.program(variant)     # traced and prepared once: not timed below
        start = time.perf_counter()
        try:
            return self._launch(traced, program, variant, scalars, record, manual)
        finally:
            self.progress.launched(traced, time.perf_counter() - start, variant)

    def _launch(self, traced, program, variant, scalars, record, manual):
        if self.checks is NO_CHECKS:
            return program.run(scalars, None, self.rng), None
        if variant == "primal":
            return self._checked_primal(traced, program, scalars)
        if variant == "adjoint":
            self._checked_adjoint(traced, program, scalars, record, manual)
            return None, None
        if variant == "tangent":
            # Forward mode replays nothing, so no read can go stale (no Rule 1 or 2): the one
            # way to lose a tangent is a store into a field without .dual.
            forwardchecks.before_tangent(self.checker, traced, traced.ir.name)
            self._before_writes(traced)
            result = program.run(scalars, None, self.rng)
            nonfinite.after_launch(self.checker, traced, "tangent", scalars, None, _host, locate)
            return result, None
        if variant == "adjoint_tangent":
            # Forward over reverse: the tangent of the adjoint. Its Rule 1 and 2 checks are the
            # plain Tape's (ti.ad.hvp runs one first); here, the tangents it could drop.
            forwardchecks.before_tangent(self.checker, traced, traced.ir.name,
                                        traced.dropped_adjoint_tangents)
            program.run(scalars, None, self.rng)
            return None, None
        raise NotImplementedError(f"the rule checker has no checks for {variant} launches")

    def _checked_primal(self, traced, program, scalars):
        name = traced.ir.name
        checker = self.checker
        forwardchecks.before_forward(checker, traced, name, [a.name for a in traced.ir.args],
                                    scalars, functools.partial(launch_rows, traced, scalars))
        record = checker.new_launch(name, traced, scalars)
        forwardchecks.clear_zeroed_gradients(checker, traced)   # (before their primals' copies)
        self._before_writes(traced)
        replayed = kernel_facts(traced).replayed
        resets = gradient_resets(traced.ir) if checker.in_custom_grad else frozenset()
        hand = handgrads.before_launch(checker, traced, record.number, self.storage,
                                       self._run_adjoint)
        memory = LoggedMemory(checker, record, replayed, resets)
        result = program.run(scalars, memory, self.rng)
        memory.finish()
        if hand is not None:
            handgrads.after_launch(checker, hand, self.storage)
        forwardchecks.note_zeroed_gradients(checker, traced, lambda f: f.data)
        return result, record

    def _run_adjoint(self, traced, scalars) -> None:
        """A forward launch's adjoint, unchecked (tinyad/check/handgrads.py runs it on copies)."""
        traced.program("adjoint").run(scalars, None, self.rng)

    def _before_writes(self, traced) -> None:
        """The primal fields the launch may write: the values a gradient was taken at are
        copied now, if not yet (check/launches.py before_write)."""
        for fld in kernel_facts(traced).written:
            self.checker.before_write(fld)

    def _checked_adjoint(self, traced, program, scalars, record, manual):
        name = traced.ir.name
        checker = self.checker
        if record is None:
            record = checker.find_launch(traced, scalars)
        adjointchecks.before_adjoint(checker, traced, name, record, manual)
        program.run(scalars, ReplayMemory(checker, record, name), self.rng)
        adjointchecks.after_adjoint(checker, traced, record, manual)
        nonfinite.after_launch(checker, traced, "adjoint", scalars, record, _host, locate)


def _host(fld):
    return fld.host_array
