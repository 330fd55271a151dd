"""Interp mode as a backend (tinyad/backend.py): the tree-walking interpreter, with the autodiff
rule checker around every launch.

The checker lives here: the access log (interp/accesslog.py) sees every load and store a launch
makes (InterpLaunch's runs), and the launch checks (tinyad/launch.py, the sequence fast mode runs
too) run before and after each launch. Fields stay in host numpy arrays, the default storage.
"""
from __future__ import annotations

import functools

from tinyad.backend import NO_CHECKS, Backend, CheckedLaunch, CheckerHooks
from tinyad.check import handgrads
from tinyad.check.rows import launch_rows
from tinyad.check.zeroing import gradient_resets
from tinyad.interp import lanelog  # noqa: F401  (gives the checked memories their lane form)
from tinyad.interp.accesslog import Checker, LoggedMemory
from tinyad.interp.evaluator import Program
from tinyad.interp.nanwatch import locate
from tinyad.interp.progress import Progress


class InterpLaunch(CheckedLaunch):
    """A checked launch in the interpreter: the access log sees every load and store the
    program makes as it runs (tinyad/launch.py runs the checks around it)."""

    __slots__ = ()

    def plan_forward(self):
        traced, scalars = self.traced, self.scalars
        return ([a.name for a in traced.ir.args],
                functools.partial(launch_rows, traced, scalars))

    def run_forward(self):
        for fld in self.facts.written:
            self.checker.before_write(fld)
        if self.facts.hand_gradient:
            return handgrads.checked_run(self, self._logged_run)
        return self._logged_run()

    def before_tangent_writes(self) -> None:
        for fld in self.facts.written:
            self.checker.before_write(fld)

    def _logged_run(self):
        checker, traced = self.checker, self.traced
        replayed = self.facts.replayed
        resets = gradient_resets(traced.ir) if checker.in_custom_grad else frozenset()
        memory = LoggedMemory(checker, self.record, replayed, resets)
        result = self.program.run(self.scalars, self.backend.rng, memory=memory)
        memory.finish()
        return result


class InterpBackend(Backend):
    name = "interp"
    CheckedLaunch = InterpLaunch

    def __init__(self, config, rng):
        super().__init__(config, rng)
        self.checker = Checker(config.check) if config.check != "off" else None
        self.checks = CheckerHooks(self.checker) if self.checker is not None else NO_CHECKS
        if self.checker is not None:
            self.checker.checks_nonfinite = config.check_nonfinite
        self.progress = Progress()

    def prepare(self, kernel_ir) -> Program:
        return Program(kernel_ir)

    def locate_nonfinite(self, traced, variant, scalars, targets):
        return locate(traced, variant, scalars, targets)
