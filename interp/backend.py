"""Interp mode as a backend (tinyad/backend.py): the tree-walking interpreter. Fields stay in
host numpy arrays, the default storage.

With checks on it runs the rule checker every backend runs (tinyad/check/checker.py, around each
launch by tinyad/launch.py): the interpreter walks a kernel's recording variant, where a launch
needs one, as it walks any kernel. What only the interpreter does is check every index of every
access as the program runs, so a launch's plan never refuses one before it runs
(`checks_every_index`): the error names the element reached.
"""
from __future__ import annotations

from tinyad.backend import Backend, CheckerHooks
from tinyad.check.checker import CheckingBackend
from tinyad.interp.evaluator import Program
from tinyad.interp.nanwatch import locate
from tinyad.interp.progress import Progress


class InterpBackend(CheckingBackend, Backend):
    name = "interp"
    checks_every_index = True

    def __init__(self, config, rng):
        super().__init__(config, rng)
        if config.check != "off":      # (else Backend's: no checker, no-op hooks)
            self.checker = self.start_checker(config)
            self.checks = CheckerHooks(self.checker)
        self.progress = Progress()

    def prepare(self, kernel_ir) -> Program:
        return Program(kernel_ir)

    def locate_nonfinite(self, traced, variant, scalars, targets):
        return locate(traced, variant, scalars, targets)
