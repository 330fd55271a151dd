"""The steps of a checked launch, the same in every backend (tinyad/launch.py runs the checks
around them).

Before a forward launch runs, its plan (tinyad/check/regions.py) says which rows it reads and
writes and which indices it certainly reaches out of bounds. Within one launch, what the IR
cannot settle it decides from values (an iteration overwriting its own element: before and
after the launch) or from indices alone (a scatter through an index field:
tinyad/check/scattercheck.py) where it can, at any size; the rest from the accesses the launch
records as it runs (tinyad/check/accessrecord.py), judged by tinyad/check/trail.py. An adjoint's
replayed reads are checked against the replay witness (tinyad/check/replaycheck.py) before it runs.
"""
from __future__ import annotations

from tinyad.check import handgrads
from tinyad.check.reached import CertainBounds
from tinyad.check.rules import ParallelConflictRuleError
from tinyad.check.accessrecord import AccessRecorder
from tinyad.check.regions import KernelRegions, regions_of
from tinyad.check.scattercheck import CLEAN, UNDECIDED
from tinyad.core.errors import reached_out_of_bounds
from tinyad.notices import note


class CheckedLaunch:
    """One launch the rule checker watches, while it runs: what the sequence of checks around
    it (tinyad/launch.py) and these steps hand each other. The sequence calls each step only in
    the variants its section names.

    tinyad/launch.py makes one per checked forward or tangent launch and sets these (no
    __init__: its frame would cost a checked launch more than all its other bookkeeping):
      backend, checker    the backend and its checker
      traced, scalars     the traced kernel and the launch's scalar arguments
      program             the backend's program of the variant
      record              the checker's record of the launch
      facts               the checker's facts about the kernel (tinyad/check/facts.py), set
                          before a forward or tangent launch's first step
    and its steps set `plan` (a forward launch's, tinyad/check/regions.py) and `regions` (a
    tangent launch's kernel regions)."""

    __slots__ = ("backend", "checker", "facts", "program", "record", "scalars", "traced",
                 "plan", "regions")

    def run(self):
        """Run the program once, plainly; -> the kernel's return value."""
        return self.program.run(self.scalars, self.backend.rng)

    def adjoint_unchecked(self, traced, scalars) -> None:
        """Run `traced`'s adjoint once, unchecked (tinyad/check/handgrads.py runs a forward
        launch's adjoint on copies to judge a gradient kernel written by hand)."""
        traced.program("adjoint", self.backend).run(scalars, self.backend.rng)

    # ---- a forward launch ---------------------------------------------------------------------
    def plan_forward(self):
        regions = self.traced.memos[KernelRegions]    # (regions_of, uncalled; the plan's `kernel`)
        scalars = self.scalars
        try:     # (KernelRegions.plan's first look, inline: a launch alike found its plan)
            plan = regions.by_scalars.get(scalars)
        except TypeError:      # an unhashable argument
            plan = None
        if plan is None:
            plan = regions.plan(scalars)
        self.plan = plan
        if plan.out_of_bounds is not None and not self.backend.checks_every_index:
            _raise_out_of_bounds(plan.out_of_bounds, regions.names, scalars)
        return plan.names_and_rows

    def run_forward(self):
        """The checks around the run: the replayed reads its writes may change are copied
        before it and compared after it, and what it reads is left waiting for its adjoint
        (tinyad/check/replaycheck.py); the gradient points of fields it writes are copied first."""
        checker, plan = self.checker, self.plan
        if plan.more or checker.in_custom_grad:
            return self._run_forward_with_more()
        # (the usual launch: no in-launch hazard, no custom or hand-written gradient, so
        # _run_forward_with_more's steps less those three looks, which a small launch, whose
        # cost is mostly its checks, would pay each time)
        if checker.uncopied_points or checker.partial_points:
            checker.before_kernel_write(plan)
        hits = checker.before_launch(plan) if plan.writes else None
        result = self.program.run(self.scalars, self.backend.rng)
        checker.after_forward(self.record, plan, hits)
        return result

    def _run_forward_with_more(self):
        """run_forward's checks, and around the run (one step: a frame each costs a small
        launch more than its checks): how the launch's in-launch hazards are checked is
        decided before it, a custom gradient's kernel keeps the gradients it may overwrite,
        and what the launch overwrote of its own reads is compared after it."""
        checker, plan = self.checker, self.plan
        own, recorder = self._decide_hazards(plan.hazards) if plan.hazards else ((), None)
        saved_grads = checker.before_custom_grad(self.traced, self.scalars) \
            if checker.in_custom_grad else None
        if checker.uncopied_points or checker.partial_points:
            checker.before_kernel_write(plan)
        hits = checker.before_launch(plan) if plan.writes else None
        if self.facts.hand_gradient:       # (most kernels are not: no call for them)
            result = handgrads.checked_run(self, self._run, recorder)
        elif recorder is None:
            result = self.program.run(self.scalars, self.backend.rng)
        else:
            result = self._recorded_run(recorder)
        record = self.record
        for fld, before in own:
            error = checker.own_overwrite(plan.kernel, fld, before, record)
            if error is not None:
                self._launch_problem(error)
                break
        if saved_grads:
            checker.after_custom_grad(saved_grads, record)
        checker.after_forward(record, plan, hits)
        return result

    def _run(self, recorder):
        if recorder is None:
            return self.program.run(self.scalars, self.backend.rng)
        return self._recorded_run(recorder)

    def _decide_hazards(self, hazards) -> tuple:
        """The fields this launch may read and write in a way its IR does not settle: a
        scatter's indices may prove it clean now (tinyad/check/scattercheck.py); an iteration
        overwriting its own element is compared after the launch (-> [(field, its values
        before)]); the rest are recorded (-> the AccessRecorder the launch runs, or None), and
        only their records build a report."""
        traced, scalars = self.traced, self.scalars
        regions, host = self.plan.kernel, self.checker.host
        own, rest = [], []
        for fld in hazards:
            scatter = regions.scatter_check(traced.ir, fld)
            verdict = UNDECIDED if scatter is None else scatter.verdict(scalars, fld, host)
            if verdict is CLEAN:
                continue
            if verdict is UNDECIDED and fld in regions.own_overwrites:
                own.append((fld, host(fld).copy()))
            else:
                rest.append(fld)
        return own, (self._recorder(rest) if rest else None)

    def _recorder(self, hazards):
        """The recording variant of the kernel for these fields (tinyad/check/accessrecord.py), made
        once per ti.init, or None (said unchecked)."""
        traced, recorders = self.traced, self.backend.recorders
        key = (traced, tuple(id(f) for f in hazards))
        if key not in recorders:
            recorders[key] = AccessRecorder.of(traced.ir, hazards, self.facts.replayed)
        recorder = recorders[key]
        if recorder is None:
            self._say_unchecked(traced.ir.name, hazards[0], "its accesses would take more "
                                "records than a launch may keep")
        return recorder

    def _recorded_run(self, recorder):
        """Run the launch as its recording variant, then judge what it recorded."""
        backend, record = self.backend, self.record
        result = recorder.run(backend.storage, self.scalars, backend.rng, backend.prepare)
        if not recorder.complete:
            self._say_unchecked(record.kernel, recorder.fields[0], "this launch's accesses "
                                "took more records than a launch may keep")
            return result
        for error in recorder.violations(record, self.checker.host,
                                         every=self.checker.mode == "warn"):
            self._launch_problem(error)
        return result

    def _say_unchecked(self, traced_name, fld, why) -> None:
        noted = self.backend.unchecked_noted
        if traced_name in noted:
            return
        noted.add(traced_name)
        note(f"{traced_name} may read and write {fld.name} in one launch in a way its IR does "
             f"not settle, and {why}: that part is unchecked (the same program on smaller "
             "fields checks it)")

    def _launch_problem(self, error) -> None:
        """A rule this launch breaks within itself: raised now inside a Tape, else when (if
        ever) the launch is differentiated. A parallel conflict only where a gradient can
        depend on it (check/races.py decides; elsewhere it was shown as a warning)."""
        checker, record = self.checker, self.record
        now = checker.tape is not None
        if isinstance(error, ParallelConflictRuleError) and not checker.races.decide(
                record, error.report.field, lambda: error, now):
            return
        if now:
            checker.report(checker.with_earlier_writes(error, record))
        else:
            record.add_problem(error)

    # ---- an adjoint launch --------------------------------------------------------------------
    # ---- an adjoint launch: its steps need no launch object (static: none is made) ---------
    @staticmethod
    def run_adjoint(backend, traced, program, scalars, record):
        """Run `program`, `traced`'s adjoint, as the adjoint the checker watches of the forward
        launch `record` (its replayed reads must read what that launch read: the checker's
        witness of them is asked first); -> its return value. A launch whose replayed reads
        still wait (no write came near them since it ran: most of a Tape's), or that replays
        none, has nothing to compare: no call for it (check_replay returns at once), unless its
        reads were let go."""
        if record is not None and record.waiting is None and (
                record.snapshots or record.released is not None):
            backend.checker.check_replay(record, traced.ir.name)
        return program.run(scalars, backend.rng)

    @staticmethod
    def unmatched_adjoint(backend, traced, scalars) -> None:
        """A .grad() that no forward launch alike precedes (its own was checked, with these
        arguments: an adjoint touches the indices its forward launch did) may reach past a
        field, as a manual sweep one step too long does (Taichi issue 8119). With
        ti.init(debug=True) every element is checked instead."""
        if backend.checks_every_index:
            return
        bounds = traced.memos[_adjoint_bounds]
        found = bounds.outside(scalars)
        if found is not None:
            _raise_out_of_bounds(found, [a.name for a in traced.ir.args], scalars,
                                 adjoint_of=traced.ir.name)

    # ---- a tangent launch ---------------------------------------------------------------------
    def before_tangent_writes(self) -> None:
        self.regions, _ = _plan(self.traced, self.scalars, self.backend.checks_every_index)
        for fld in self.regions.written_fields:
            self.checker.before_write(fld)

    def after_tangent(self) -> None:
        self.checker.tangent_wrote(self.regions.written_fields)   # values too


def _plan(traced, scalars, checks_every_index: bool):
    """-> (the kernel's KernelRegions, this launch's LaunchPlan), once the plan shows no
    index the launch certainly reaches out of bounds (else the bounds error, before it
    runs; where the program checks every index as it runs, that check names the element)."""
    regions = regions_of(traced)
    plan = regions.plan(scalars)
    if plan.out_of_bounds is not None and not checks_every_index:
        _raise_out_of_bounds(plan.out_of_bounds, regions.names, scalars)
    return regions, plan


def _adjoint_bounds(traced) -> CertainBounds:
    return CertainBounds(traced.program_ir("adjoint"))


def _raise_out_of_bounds(found, names, scalars, adjoint_of: str | None = None):
    """A launch (or the adjoint of kernel `adjoint_of`) certainly indexes a field out of its
    bounds (tinyad/check/reached.py): the bounds error, before it runs."""
    site, dim, index = found
    given = ", ".join(f"{n}={v!r}" for n, v in zip(names, scalars))
    if adjoint_of is not None:
        launch = f"{adjoint_of}.grad({given})"
    else:
        launch = f"this launch ({given})" if given else "this launch"
    raise reached_out_of_bounds(site.field, dim, index, launch, site.node.loc)
