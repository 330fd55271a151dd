"""Fast mode as a backend (tinyad/backend.py): kernels compiled by numba, for the CPU or CUDA.

Besides compiling and launching, it owns two things a fast-mode program needs across kernels:

  * compiling ahead (compile/ahead.py): the adjoint of a kernel that touches a field with a
    gradient is queued for a helper process at the kernel's first launch (before that launch
    compiles the kernel itself), so it compiles while this process compiles and runs the
    forward pass, inside a Tape or not (Warp, too, builds every kernel's adjoint with it); when
    the first adjoint is needed (a backward pass has begun), the adjoints of any other kernels
    launched so far are queued too, latest first;
  * on CUDA, the fields' device copies (compile/devicemirror.py), its `storage`.

With checks on (ti.init's check, "error" by default) it runs the autodiff rule checks around
every launch: the launch checks interp mode runs (tinyad/check/forward.py, adjoints.py) and
the replay witness of compile/replaycheck.py, both at compiled speed. Within one launch, what the IR
cannot settle it decides from values (an iteration overwriting its own element: before and
after the launch) or from indices alone (a scatter through an index field:
compile/scattercheck.py) where it can, at any size; the rest from the accesses the launch
records as it runs (compile/accessrecord.py), judged by tinyad/check/trail.py.
"""
from __future__ import annotations

from tinyad.backend import NO_CHECKS, Backend, CheckerHooks
from tinyad.check import adjoints as adjointchecks
from tinyad.check import forward as forwardchecks
from tinyad.check import handgrads, nonfinite
from tinyad.check.facts import kernel_facts
from tinyad.check.nonfinite import NonFiniteChecks
from tinyad.check.rules import ParallelConflictRuleError
from tinyad.compile import (
    ahead,
    backend_for,
    compile_ahead,
    compile_kernel,
    cuda_unavailable_reason,
)
from tinyad.compile.accessrecord import AccessRecorder
from tinyad.compile.regions import regions_of
from tinyad.compile.replaycheck import FastChecker
from tinyad.compile.scattercheck import CLEAN, UNDECIDED
from tinyad.compile.sequence import sequence_runner
from tinyad.core import ir
from tinyad.core.errors import reached_out_of_bounds
from tinyad.core.notices import note
from tinyad.core.reached import CertainBounds


class CheckerWithNonFinite(NonFiniteChecks, FastChecker):
    """Fast mode's rule checker, with NaN and infinity in gradients (check/nonfinite.py)."""


class FastBackend(Backend):
    name = "fast"
    arrays_as_parameters = True   # compiled code takes every array as a parameter

    def __init__(self, config, rng):
        super().__init__(config, rng)
        self.target = backend_for(config.arch)          # "cpu" or "cuda"
        if str(config.arch) == "cuda" and self.target != "cuda":
            self.notices.append(f"ti.init(arch=cuda): {cuda_unavailable_reason()}, fast mode "
                                "runs on the CPU")
        if self.target == "cuda":
            from tinyad.compile.devicemirror import DeviceMirror  # noqa: PLC0415  (imports CUDA)
            self.storage = DeviceMirror()
        # Compiled kernels raise part way only with debug=True's bounds checks (tinyad/undo.py)
        self.launches_can_fail = bool(config.debug)
        self.launched: dict = {}         # traced kernel -> number of its latest primal launch
        self.launches = 0
        self.adjoints_queued = False     # compile/ahead.py has been given the adjoints
        self.asked_ahead: set = set()    # traced kernels whose adjoints were queued ahead
        self.checker = (CheckerWithNonFinite(config.check, self.storage.to_host)
                        if config.check != "off" else None)
        self.checks = CheckerHooks(self.checker) if self.checker is not None else NO_CHECKS
        if self.checker is not None:
            self.checker.checks_nonfinite = config.check_nonfinite
        # (traced, variant, scalars, targets) -> where a NaN or infinity a launch wrote came
        # from: interp/nanwatch.py's locate, given by tinyad/backend.py's create()
        self.nonfinite_locator = None
        self.unchecked_noted: set = set()   # kernels whose in-launch check the user was told of
        self.recorders: dict = {}           # (traced, fields) -> AccessRecorder or None
        if self.target == "cpu":
            ahead.start()    # ready by the first adjoint queued (compile/ahead.py)

    def sync(self):
        if self.target == "cuda":
            from numba import cuda  # noqa: PLC0415
            cuda.synchronize()

    runs_sequences = True

    def sequence(self, program, buffers=()):
        """A captured program as one compiled function where it can be (compile/sequence.py)."""
        return sequence_runner(program, self.storage, self.rng, self.target, buffers)

    def prepare(self, kernel_ir):
        config = self.config
        mirror = self.storage if self.target == "cuda" else None
        return compile_kernel(kernel_ir, self.target, config.debug, config.fast_math,
                              mirror=mirror)

    def launch(self, traced, variant, scalars, record=None, manual=True):
        if variant == "primal" and traced not in self.launched:
            self._first_launch(traced)
        program = traced.program(variant)
        if variant == "primal":
            self.launches += 1
            self.launched[traced] = self.launches
            if self.checker is not None:
                return self._checked_primal(traced, program, scalars)
        elif self.checker is not None and variant == "adjoint":
            self._checked_adjoint(traced, program, scalars, record, manual)
            return None, None
        elif self.checker is not None and variant == "tangent":
            # Forward mode replays nothing, so no read can go stale: only a lost tangent.
            forwardchecks.before_tangent(self.checker, traced, traced.ir.name)
            regions, _ = self._plan(traced, scalars)
            for fld in regions.written_fields:
                self.checker.before_write(fld)
            result = program(scalars, self.rng)
            self.checker.tangent_wrote(regions.written_fields)   # values too
            nonfinite.after_launch(self.checker, traced, "tangent", scalars, None,
                                   self.checker.host, self._locate)
            return result, None
        elif self.checker is not None and variant == "adjoint_tangent":
            # Forward over reverse: only the tangents it could drop (ti.ad.hvp runs the plain,
            # checked Tape first).
            forwardchecks.before_tangent(self.checker, traced, traced.ir.name,
                                        traced.dropped_adjoint_tangents)
            program(scalars, self.rng)
            return None, None
        return program(scalars, self.rng), None

    def _checked_primal(self, traced, program, scalars):
        name, checker = traced.ir.name, self.checker
        regions, plan = self._plan(traced, scalars)
        forwardchecks.before_forward(checker, traced, name, regions.names, scalars, plan.rows)
        record = checker.new_launch(name, traced, scalars)
        own, recorded = self._decide_hazards(traced, scalars, record, plan.hazards) \
            if plan.hazards else ((), None)
        saved_grads = checker.before_custom_grad(traced, scalars) if checker.in_custom_grad \
            else None
        stores_grads = kernel_facts(traced).grads_stored
        if stores_grads:     # (before the copies for their primals' gradient points)
            forwardchecks.clear_zeroed_gradients(checker, traced)
        if checker.uncopied_points or checker.partial_points:
            checker.before_kernel_write(plan)
        hits = checker.before_launch(plan) if plan.writes else None
        hand = handgrads.before_launch(checker, traced, record.number, self.storage,
                                       self._run_adjoint)
        if recorded is None:
            result = program(scalars, self.rng)
        else:
            result = self._recorded_launch(recorded, record, scalars)
        if hand is not None:
            handgrads.after_launch(checker, hand, self.storage)
        for fld, before in own:
            error = checker.own_overwrite(regions, fld, before, record)
            if error is not None:
                self._launch_problem(record, error)
                break
        if saved_grads:
            checker.after_custom_grad(saved_grads, record)
        checker.after_forward(record, plan, hits)
        if stores_grads:
            forwardchecks.note_zeroed_gradients(checker, traced, checker.host)
        return result, record

    def _run_adjoint(self, traced, scalars) -> None:
        """A forward launch's adjoint, unchecked (tinyad/check/handgrads.py runs it on copies)."""
        traced.program("adjoint")(scalars, self.rng)

    def _plan(self, traced, scalars):
        """-> (the kernel's KernelRegions, this launch's LaunchPlan), once the plan shows no
        index the launch certainly reaches out of bounds (else the bounds error, before it
        runs; with ti.init(debug=True) every element is checked instead)."""
        regions = regions_of(traced)
        plan = regions.plan(scalars)
        if plan.out_of_bounds is not None and not self.config.debug:
            _raise_out_of_bounds(plan.out_of_bounds, regions.names, scalars)
        return regions, plan

    def _decide_hazards(self, traced, scalars, record, hazards) -> list:
        """The fields this launch may read and write in a way its IR does not settle: a
        scatter's indices may prove it clean now (compile/scattercheck.py); an iteration
        overwriting its own element is compared after the launch (-> [(field, its values
        before)]); the rest are recorded (-> the AccessRecorder the launch runs, or None), and
        only their records build a report."""
        regions, host = regions_of(traced), self.checker.host
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
        return own, (self._recorder(traced, rest) if rest else None)

    def _recorder(self, traced, hazards):
        """The recording variant of `traced` for these fields (compile/accessrecord.py), made
        once, or None (said unchecked)."""
        key = (traced, tuple(id(f) for f in hazards))
        if key not in self.recorders:
            self.recorders[key] = AccessRecorder.of(traced.ir, hazards,
                                                    kernel_facts(traced).replayed)
        recorder = self.recorders[key]
        if recorder is None:
            self._say_unchecked(traced.ir.name, hazards[0], "its accesses would take more records "
                                "than a launch may keep")
        return recorder

    def _recorded_launch(self, recorder, record, scalars):
        """Run the launch as its recording variant, then judge what it recorded."""
        result = recorder.run(self.storage, scalars, self.rng, self.prepare)
        if not recorder.complete:
            self._say_unchecked(record.kernel, recorder.fields[0], "this launch's accesses "
                                "took more records than a launch may keep")
            return result
        for error in recorder.violations(record, self.checker.host,
                                         every=self.checker.mode == "warn"):
            self._launch_problem(record, error)
        return result

    def _say_unchecked(self, traced_name, fld, why) -> None:
        if traced_name in self.unchecked_noted:
            return
        self.unchecked_noted.add(traced_name)
        note(f"fast mode: {traced_name} may read and write {fld.name} in one launch in a way "
             f"its IR does not settle, and {why}: that part is unchecked here (tinyad check "
             "--mode interp checks it)")

    def _launch_problem(self, record, error) -> None:
        """A rule this launch breaks within itself: raised now inside a Tape, else when (if
        ever) the launch is differentiated. A parallel conflict only where a gradient can
        depend on it (check/races.py decides; elsewhere it was shown as a warning)."""
        now = self.checker.tape is not None
        if isinstance(error, ParallelConflictRuleError) and not self.checker.races.decide(
                record, error.report.field, lambda: error, now):
            return
        if now:
            self.checker.report(error)
        else:
            record.add_problem(error)

    def _checked_adjoint(self, traced, program, scalars, record, manual):
        name, checker = traced.ir.name, self.checker
        if record is None:
            record = checker.find_launch(traced, scalars)
            if record is None and not self.config.debug:
                self._adjoint_bounds(traced, scalars)
        adjointchecks.before_adjoint(checker, traced, name, record, manual)
        checker.check_replay(record, name)
        program(scalars, self.rng)
        adjointchecks.after_adjoint(checker, traced, record, manual)
        nonfinite.after_launch(checker, traced, "adjoint", scalars, record, checker.host,
                               self._locate)

    def _locate(self, traced, variant, scalars, targets):
        """The interpreter's re-run of one launch, on the fields' host copies."""
        for fld in ir.fields_of(traced.variant_ir(variant).body):
            self.checker.host(fld)       # (brought back from the device, on CUDA)
        return self.nonfinite_locator(traced, variant, scalars, targets)

    @staticmethod
    def _adjoint_bounds(traced, scalars) -> None:
        """A .grad() that no forward launch alike precedes (its own was checked, with these
        arguments: an adjoint touches the indices its forward launch did) may reach past a
        field, as a manual sweep one step too long does (Taichi issue 8119)."""
        bounds = getattr(traced, "adjoint_bounds", None)
        if bounds is None:
            bounds = traced.adjoint_bounds = CertainBounds(traced.program_ir("adjoint"))
        found = bounds.outside(scalars)
        if found is not None:
            _raise_out_of_bounds(found, [a.name for a in traced.ir.args], scalars,
                                 adjoint_of=traced.ir.name)

    def _first_launch(self, traced) -> None:
        """Before `traced`'s first launch compiles it: if it touches a field with a gradient, it
        will likely be differentiated, so its adjoint starts compiling in the helper process
        now, while this one compiles and runs the forward pass (cold, each of mpm's two large
        adjoints takes seconds). A program that never differentiates it spends a helper's
        time, not this process's."""
        if self.target != "cpu" or traced in self.asked_ahead or not ahead.enabled():
            return
        if any(f.role == "primal" and f.has_grad and f.grad.requested
               for f in ir.fields_of(traced.ir.body)):
            self._compile_adjoints_ahead([traced])

    def backward_starts(self, first) -> None:
        """Start compiling the adjoints of the kernels launched so far, latest first, in a
        helper process while this one compiles `first`'s."""
        if self.adjoints_queued:
            return
        self.adjoints_queued = True
        self._compile_adjoints_ahead(sorted((k for k in self.launched if k is not first),
                                            key=self.launched.get, reverse=True))

    def _compile_adjoints_ahead(self, kernels) -> None:
        adjoints = []
        for k in kernels:
            if k in self.asked_ahead or k.has_program("adjoint"):
                continue
            self.asked_ahead.add(k)
            try:
                adjoint = k.program_ir("adjoint")
            except Exception:     # noqa: BLE001  speculative: raised again if .grad() runs
                continue
            if adjoint.body:
                adjoints.append(adjoint)
        if adjoints:
            compile_ahead(adjoints, self.target, self.config.debug, self.config.fast_math)


def _raise_out_of_bounds(found, names, scalars, adjoint_of: str | None = None):
    """A launch (or the adjoint of kernel `adjoint_of`) certainly indexes a field out of its
    bounds (tinyad/core/reached.py): the bounds error, before it runs."""
    site, dim, index = found
    given = ", ".join(f"{n}={v!r}" for n, v in zip(names, scalars))
    if adjoint_of is not None:
        launch = f"{adjoint_of}.grad({given})"
    else:
        launch = f"this launch ({given})" if given else "this launch"
    raise reached_out_of_bounds(site.field, dim, index, launch, site.node.loc)
