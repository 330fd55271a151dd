"""Gradients lost around a Tape for a reason the checker can see (the rules' text is in
tinyad/check/rules.py):
  * a gradient read inside the Tape (in Python scope, or by a taped kernel such as an optimiser
    step), before its backward pass ran;
  * a no-grad kernel writing, from differentiated fields, a field the taped kernels then read;
  * the Tape's loss written by no launch inside it, and by a kernel after it;
  * a gradient cleared after the backward pass, then read before another backward ran;
  * a Tape reading state that an earlier Tape computed and a copy carried over (the per-frame
    Tape: the gradient is truncated at the Tape's start);
  * outside a Tape, a gradient read after a manual sweep skipped an adjoint that would add to
    it (tinyad/check/sweeps.py).
`LostGradients` is what the rule checker (tinyad/check/launches.py) remembers for these.
"""
from __future__ import annotations

from dataclasses import dataclass

from tinyad.check import rules
from tinyad.check.facts import kernel_facts
from tinyad.check.render import print_report
from tinyad.check.sweeps import ManualSweeps
from tinyad.core.srcloc import user_loc


def _line(loc) -> tuple | None:
    return None if loc is None else (loc.file, loc.line)


class LostGradients:
    """One per rule checker (one per ti.init)."""

    def __init__(self, checker):
        self.checker = checker
        self.warned: set = set()          # the warnings shown, by rule and lines
        self.cut: dict = {}               # in a Tape: field a no-grad kernel derived -> story
        self.unwritten_loss = None        # (loss, the Tape's line) until a new Tape begins
        self.tape_loc = None              # the recording Tape's line
        self.backward_at = 0              # the checker's time the latest Tape's backward ended
        self.backward_loc = None          # that Tape's line
        self.read_at: dict = {}           # grad field -> time last read (Python or kernel)
        self.held_gradient: set = set()   # grads about to be written, holding a gradient unread
        self.cleared: dict = {}           # grad field -> line that cleared it, unread since
        self.sweeps = ManualSweeps(checker, self.warn_once)
        # Told of every gradient read (grad, index, loc, kernel) and of every forward launch
        # that loads gradients (facts, kernel name) while the checker's nonfinite_owed holds a
        # report: the non-finite check's (nonfinite.py; only a use of what it holds matters)
        self.used = self.loaded = _ignore

    def warn_once(self, report) -> None:
        read = report.read.loc if report.read is not None else None
        write = report.write.loc if report.write is not None else None
        key = (report.rule, _line(read), _line(write))
        if key not in self.warned:
            self.warned.add(key)
            print_report(report)

    # ---- the Tape's life (its beginning and its backward's end: LaunchChecker.begin_tape,
    # tape_differentiated set what is here, in line) ------------------------------------------
    def loss_unwritten(self, loss, tape_loc) -> None:
        self.unwritten_loss = (loss, tape_loc)

    # ---- gradients read and cleared -------------------------------------------------------
    def gradient_read(self, grad, tape_loc=None, loc=None, kernel=None, index=None) -> None:
        """Python scope (or, with `loc` given, `kernel`) read a gradient (element `index`;
        None: all of it, or the elements a kernel loads)."""
        checker = self.checker
        if checker.nonfinite_owed:
            self.used(grad, index, loc, kernel)
        if checker.tape is not None and loc is None:
            if not checker.in_custom_primal:
                self.warn_once(rules.gradient_read_inside_tape(
                    gradient=grad.name, read_loc=user_loc(), tape_loc=tape_loc))
            return
        cleared = self.cleared.pop(grad, None)
        if cleared is not None:
            self.warn_once(rules.gradient_cleared_before_read(
                gradient=grad.name, clear_loc=cleared, read_loc=loc or user_loc(),
                tape_loc=self.backward_loc, reader=kernel))
        if self.sweeps.adjoint_at:
            self.sweeps.read(grad, loc or user_loc(), kernel)
        self.read_at[grad] = checker.tick()

    def gradient_will_change(self, grad) -> None:
        """Python scope is about to write `grad`: does it hold a backward pass's gradient that
        nothing has read yet?"""
        if self.backward_at and self.read_at.get(grad, 0) < self.backward_at and \
                grad not in self.cleared and grad.data.any():
            self.held_gradient.add(grad)

    def gradient_written(self, grad, index, loc) -> None:
        """...and has written it: all zero now, it was cleared before anything read it."""
        held = grad in self.held_gradient
        self.held_gradient.discard(grad)
        self.cleared.pop(grad, None)
        if held and index is None and not grad.data.any():
            self.cleared[grad] = loc or user_loc()

    # ---- kernel launches --------------------------------------------------------------------
    def no_grad_launch(self, launch) -> None:
        """A Tape recorded a launch of a no-grad kernel: the fields it derives from
        differentiated fields get no gradient through it."""
        for target, sources, loc in kernel_facts(launch.compiled).dependencies:
            source = next((s for s in sources if s is not target and s.has_grad), None)
            if source is not None and target.has_grad:
                self.cut.setdefault(target, (launch.kernel, loc, source))

    def forward_launch(self, facts, compiled) -> None:
        """Before a forward launch of `compiled` (`facts`: its facts, tinyad/check/facts.py).
        Inside a Tape it has something to do only where the kernel loads a gradient or a
        no-grad kernel cut a field (check/forward.py calls it only then). The kernel's name is
        looked up only for what names it."""
        checker = self.checker
        owed = checker.nonfinite_owed       # (the non-finite check's hooks: only while it owes)
        if facts.grads_loaded and owed:
            self.loaded(facts, compiled.ir.name)
        if checker.tape is not None:
            if self.cut:
                self._reads_cut(facts, compiled.ir.name)
            if facts.grads_loaded and not checker.in_custom_primal:
                self._grads_read_in_tape(facts, compiled.ir.name)
            return
        if self.unwritten_loss is not None and self.unwritten_loss[0] in facts.written:
            loss, tape_loc = self.unwritten_loss
            self.unwritten_loss = None
            self.checker.report(rules.loss_written_after_tape(
                loss=loss.name, kernel=compiled.ir.name, write_loc=facts.first_store[loss],
                tape_loc=tape_loc))
        if owed or self.cleared or self.sweeps.adjoint_at:
            for grad in facts.grads_loaded:
                self.gradient_read(grad, loc=facts.first_grad_load.get(grad),
                                   kernel=compiled.ir.name)
        else:           # (what gradient_read does then: an optimiser step's every launch)
            for grad in facts.grads_loaded:
                self.read_at[grad] = checker.tick()
        if self.sweeps.reads:
            for fld in facts.written + facts.grads_stored:
                self.sweeps.written(fld, python=False)

    def _grads_read_in_tape(self, facts, kernel_name: str) -> None:
        """A taped kernel loads a gradient (an optimiser step inside the `with` block): the
        backward pass has not filled it yet."""
        for grad in facts.grads_loaded:
            self.warn_once(rules.gradient_read_inside_tape(
                gradient=grad.name, read_loc=facts.first_grad_load[grad],
                tape_loc=self.tape_loc, kernel=kernel_name))

    def _reads_cut(self, facts, kernel_name: str) -> None:
        for fld in facts.loaded:
            story = self.cut.get(fld)
            if story is not None:
                no_grad, write_loc, source = story
                self.warn_once(rules.no_grad_kernel_on_path(
                    kernel=no_grad, field=fld.name, source=source.name, write_loc=write_loc,
                    taped_kernel=kernel_name, read_loc=facts.first_load[fld]))
        for fld in facts.written:
            self.cut.pop(fld, None)


def _ignore(*args) -> None:
    pass


@dataclass(frozen=True)
class CopyFacts:
    """What the computed-before-the-Tape check asks of a launch (KernelFacts), for
    dst.copy_from(src) inside a Tape (tinyad/check/launches.py python_copy)."""
    dst: object
    src: object
    loc: object
    loaded_own: frozenset = frozenset()

    @property
    def loaded(self):
        return (self.src,)

    @property
    def loads_differentiable(self):
        return (self.src,) if self.src.has_grad else ()

    @property
    def written(self):
        return (self.dst,)

    @property
    def first_load(self):
        return {self.src: self.loc}
