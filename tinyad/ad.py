"""`ti.ad`: Tape, FwdMode, custom gradients, no_grad, clearing gradients, gradient verification.

A Tape records every kernel launched inside it; on exit it seeds loss.grad = 1 and runs the
adjoint kernels in reverse order with the recorded arguments (Taichi's semantics). Inside a
FwdMode every kernel launch runs its tangent variant instead (tinyad/autodiff/forward.py):
values and tangents in one pass, the tangents in the fields' `.dual`.
`Tape(loss, grad_check=[fields])` then checks the gradients by finite differences
(tinyad/tapecheck.py); `verify` and `formula` check them against sympy (tinyad/gradverify.py).
"""
from __future__ import annotations

import functools
import operator
import warnings
import weakref
from itertools import repeat

import numpy as np

from tinyad import undo
from tinyad.backend import NO_CHECKS
from tinyad.check import nonfinite
from tinyad.check.rules import ReadThenOverwriteRuleError, SecondWriteRuleError
from tinyad.core import ir
from tinyad.core.errors import TinyadAssertionError, TinyadRuntimeError, TinyadTypeError
from tinyad.core.srcloc import user_loc
from tinyad.field import Field, settle_layout, unrequested_grads
from tinyad.funcad import grad, jvp, vjp  # noqa: F401  (ti.ad.grad(f) ...: derivatives of funcs)
from tinyad.runtime import (
    Recorder,
    active_forward_mode,
    active_recorder,
    python_storage,
    runtime,
)
from tinyad.taichi_internals import AutodiffMode
from tinyad.twins import placed_grads, placed_twins

# What Taichi 1.7.4 warns for Tape(validation=True) without ti.init(debug=True); tinyad quotes
# it (programs and tests written for Taichi look for it) and says what holds here instead.
TAICHI_VALIDATION_WARNING = ("Debug mode is disabled, autodiff valid check will not work. "
                             "Please specify `ti.init(debug=True)` to enable the check.")


def _validation_note() -> str:
    config = runtime.config
    if runtime.backend.checks is not NO_CHECKS:
        taichi = "" if config.debug else (f" (Taichi would warn: \"{TAICHI_VALIDATION_WARNING}\" "
                                          "tinyad's checks do not need debug=True)")
        return ("Tape(validation=True): tinyad already checks the autodiff rules at every "
                f"launch in this run (check={config.check!r}); the flag changes nothing" + taichi)
    return (f"Tape(validation=True): this run checks no autodiff rules (mode={config.mode!r}, "
            f"check={config.check!r}); run with checks on (the default, in either mode) to have "
            "them checked")


def clear_all_gradients(gradient_type=None) -> None:
    """Zero every field's .grad (or, with gradient_type="dual", every .dual); a gradient's
    own .dual (forward over reverse) is zeroed with either."""
    for other in placed_twins("dual" if str(gradient_type).lower().endswith("dual") else "grad"):
        other._fill(0, None)


def _set_by_tape(fields, value, loc, grads=None) -> None:
    """A Tape's own writes of whole gradients (clearing them all on entry, seeding its loss's),
    for the user's line `loc`: each field filled, the undo log and the rule checker told once
    for all of them (per-field hooks cost a Tape of a small kernel more than its launches), and
    nothing recorded, as for any write the Tape does itself."""
    log = undo.active_undo.get()
    if log is not None:
        log.save(fields)
    storage = python_storage()          # (ti.capture records these fills: tinyad/capture.py)
    for fld in fields:
        storage.fill(fld, value)
    runtime.backend.checks.gradients_set(fields, loc, grads)


class Tape(Recorder):
    """`with ti.ad.Tape(loss): ...` records launches, then differentiates them on exit."""

    records_field_ops = True   # copy_from, fill, from_numpy, x[i] = v (tinyad/tapeops.py)

    def __init__(self, loss=None, clear_gradients=True, validation=False, grad_check=None):
        self.loss = loss
        self.clear_gradients = clear_gradients
        self.validation = validation
        if validation:
            # Taichi's validation=True turns on its (partial) rule checks; tinyad's run anyway
            # where the backend has them, so the flag is accepted but never silently ignored.
            warnings.warn(_validation_note(), stacklevel=2)
        self.grad_check = grad_check
        self.entries: list = []      # (adjoint callable, args, kwargs), in launch order
        self.entered = False
        self.gradient_evaluated = False
        self._token = None
        self.calls: list = []        # (primal callable, args), as Taichi's Tape keeps them
        self.modes: list = []        # per call: AutodiffMode.VALIDATION or .REVERSE, as Taichi
        self._call_kwargs: list = []   # per call: its keyword arguments (grad_check replays)
        self._grad_checker = None
        self._began = None           # the checker's time when it began recording
        self._written: set = set()     # the fields something recorded wrote (tapeops.py)
        self._elements_set: set = set()   # (field, index) set in Python scope first
        self._custom = False           # a grad_replaced function was recorded

    def __enter__(self):
        if self.entered:
            raise TinyadRuntimeError("Tape can be entered only once.",
                                     hint="make a new ti.ad.Tape(loss=...) for each recording")
        if active_recorder.get() is not None:
            raise TinyadRuntimeError("a Tape is already recording: tinyad Tapes do not nest",
                                     hint="record everything in one Tape, or close the first "
                                          "before opening the next")
        self.entered = True
        loss = self.loss
        if unrequested_grads:
            settle_layout()   # the layout is final now, as at a kernel launch
        if getattr(loss, "is_ndarray", False):   # any one-element ndarray, as in Taichi
            if not loss.has_grad:
                raise TinyadRuntimeError(
                    "Gradients of loss are not allocated, please set needs_grad=True for all "
                    "ndarrays that are required by autodiff.",
                    hint=f"create {loss.name} with needs_grad=True")
            if loss.host_array.size != 1:
                raise TinyadRuntimeError("The loss of `Tape` must be an ndarray with only one "
                                         f"element, {loss.name} has shape {loss.shape}")
        elif loss is not None:
            if not isinstance(loss, Field) or loss.shape != () or loss.element_shape:
                raise TinyadRuntimeError("The loss of Tape must be a 0-D field, i.e. scalar",
                                         hint="declare it as ti.field(ti.f32, shape=())")
            if not loss.has_grad:
                raise TinyadRuntimeError(
                    "Gradients of loss are not allocated, please set needs_grad=True for all "
                    "fields that are required by autodiff.",
                    hint=f"declare {loss.name} with needs_grad=True")
        # From here on every field is saved before its first change: a Tape that raises puts
        # them all back (tinyad/undo.py), where launches are checked (interp, debug=True)
        self._undo = undo.UndoLog() if runtime.backend.launches_can_fail else None
        self._undo_token = undo.active_undo.set(self._undo)
        try:
            self._begin(loss)
        except BaseException:    # (a grad_check of an f32 loss, say): as if never entered
            self._restore()
            undo.active_undo.reset(self._undo_token)
            raise
        self._token = active_recorder.set(self)
        return self

    def _begin(self, loss) -> None:
        """__enter__'s writes and hooks: gradients cleared, the loss zeroed, the checker told."""
        self._checks = runtime.backend.checks
        # the `with` line, for the checker's reports of the Tape's own writes and adjoints
        # (found once here: a walk up the stack from each costs more than a small launch)
        self._loc = user_loc(2) if self._checks is not NO_CHECKS else None   # (__enter__'s caller)
        if self.clear_gradients:
            _set_by_tape(placed_twins("grad"), 0, self._loc, placed_grads())
        if loss is not None:
            loss._fill(0, self._loc, by_tape=True)
        if self.grad_check:
            from tinyad.tapecheck import GradChecker  # noqa: PLC0415
            self._grad_checker = GradChecker(loss, self.grad_check)   # saves every field
        self._checks.begin_tape(self._loc)
        checker = getattr(self._checks, "checker", None)
        self._began = checker.tick() if checker is not None else None

    def record(self, kernel, args, kwargs, launch=None):
        """Called by each kernel launched while this Tape is active."""
        self._called(kernel, args, kwargs)
        self.entries.append((kernel.grad, args, kwargs, launch))
        traced = kernel.last_traced
        written = traced._written.get("primal")
        if written is None:
            written = traced._written["primal"] = ir.fields_written(traced.ir.body)
        self._written.update(written)
        if kernel.is_no_grad:
            self._checks.taped_no_grad_launch(launch)

    def record_field_op(self, primal, adjoint, args, dst):
        """A Python-scope write of `dst` (tinyad/tapeops.py): `primal(*args)` does it again (for
        grad_check), `adjoint` is its gradient."""
        self._called(primal, args, {})
        # (the Tape by a weak reference: its entries holding this would make each Tape's
        # entries, and the launches' arguments in them, a cycle only a full collection frees)
        later = functools.partial(_launches_after, weakref.ref(self), len(self.entries))
        where = {"loc": self._loc and user_loc(), "later": later}
        self.entries.append((adjoint, args, where, None))
        if dst is not None:      # (an element write: noted by wrote_before already)
            self._written.add(dst)

    def wrote_before(self, fld, index) -> bool:
        """Did something recorded in this Tape write element `index` of `fld`?"""
        return fld in self._written or (fld, index) in self._elements_set

    def note_set(self, fld, index) -> None:
        """x[index] = v in Python scope, with nothing in this Tape writing x[index] before."""
        self._elements_set.add((fld, index))

    def _called(self, primal, args, kwargs):
        self.calls.append((primal, args))
        self._call_kwargs.append(kwargs)
        self.modes.append(AutodiffMode.VALIDATION if self.validation else AutodiffMode.REVERSE)
        if self.validation and hasattr(primal, "autodiff_mode"):
            primal.autodiff_mode = AutodiffMode.VALIDATION   # until the Tape ends, as Taichi

    def record_custom(self, grad_fn, args, kwargs, primal=None):
        """Called by a grad_replaced function: its gradient replaces its kernels'."""
        if primal is not None:
            self._called(primal, args, kwargs)
        self.entries.append((grad_fn, args, kwargs, None))
        self._custom = True

    def __exit__(self, exc_type, exc, tb):
        active_recorder.reset(self._token)
        for primal, _ in self.calls:
            if hasattr(primal, "autodiff_mode"):
                primal.autodiff_mode = AutodiffMode.NONE
        try:
            self._checks.end_tape(self._loc)
            if exc_type is None and self.loss is not None and \
                    self.loss not in self._written and not self._custom and \
                    self._checks is not NO_CHECKS and not self.wrote_before(self.loss, ()):
                self._checks.tape_loss_unwritten(self.loss, self._loc)
            if exc_type is None:
                self.grad()
        except BaseException as error:
            self._restore()
            failure = _as_validation_failure(error) if self.validation else None
            if failure is None:
                raise
            raise failure from None
        else:
            if exc_type is not None:
                self._restore()
                failure = _as_validation_failure(exc) if self.validation else None
                if failure is not None:
                    raise failure from None
        finally:
            undo.active_undo.reset(self._undo_token)

    def _backward(self):
        if self.loss is not None:
            seeded = (self.loss.grad,)
            _set_by_tape(seeded, 1, self._loc, seeded)
        for adjoint, args, kwargs, launch in reversed(self.entries):
            if hasattr(adjoint, "replay"):
                adjoint.replay(args, kwargs, launch)
                continue
            with runtime.backend.checks.custom_gradient(getattr(adjoint, "__name__", "")):
                adjoint(*args, **kwargs)

    def _can_run_again(self, checker) -> bool:
        """Can the backward pass run again from the state it started in, rebuilt without a
        copy: the gradients cleared on entry, nothing but the adjoints writing them since, no
        custom gradient (a Python function) among the entries?"""
        began = self._began
        # (each a loop in C: a long Tape of small kernels has an entry per launch)
        return (self.clear_gradients and len(self.entries) > 1 and began is not None
                and all(map(hasattr, map(_adjoint_of, self.entries), repeat("replay")))
                and max(checker.grad_cleared_at.values(), default=0) <= began
                and max(checker.hand_gradient_at.values(), default=0) <= began)

    def _restore(self):
        if self._undo is not None:
            self._undo.restore()

    def grad(self):
        if self.gradient_evaluated:
            raise TinyadRuntimeError("Gradients of the Tape have already been evaluated")
        checker = getattr(runtime.backend.checks, "checker", None)
        batching = checker is not None and len(self.entries) > 1 and \
            self._can_run_again(checker)
        try:      # (NaN and infinity looked for once, at the end: tinyad/check/nonfinite.py)
            if checker is not None:     # (a batch left by a backward that raised: dropped)
                checker.nonfinite_batching, checker.nonfinite_batch = batching, None
            self._backward()
        finally:
            if checker is not None:
                checker.nonfinite_batching = False
        self.gradient_evaluated = True
        try:
            runtime.backend.checks.tape_differentiated()
            if checker is not None and checker.nonfinite_batch is not None:
                nonfinite.finish_batch(checker)     # (the batch's look, after the others)
        except nonfinite.Relocate as found:
            # Where it first appeared: the backward again from its start, launch by launch
            _set_by_tape(placed_twins("grad"), 0, self._loc)
            self._backward()
            if found.args[0] not in checker.nonfinite_seen:    # (no launch said where)
                nonfinite.relocation_failed(checker, found, "the Tape")
        if self._grad_checker is not None:
            self._grad_checker.check([(primal, args, kwargs) for (primal, args), kwargs
                                      in zip(self.calls, self._call_kwargs)])


_adjoint_of = operator.itemgetter(0)      # a Tape entry's adjoint callable


def _launches_after(tape, index: int) -> list:
    """The checker's records of the launches `tape()` recorded after entry `index` (None:
    unchecked)."""
    return [launch for *_, launch in tape().entries[index + 1:]]


_VALIDATION_CLASSES: dict = {}


def _as_validation_failure(error):
    """Under Tape(validation=True), Taichi reports a broken Global Data Access Rule as a
    TaichiAssertionError: the same tinyad error, also of that class, so both `except` clauses
    catch it. None for any other error."""
    if not isinstance(error, (ReadThenOverwriteRuleError, SecondWriteRuleError)) or \
            isinstance(error, TinyadAssertionError):
        return None
    cls = type(error)
    both = _VALIDATION_CLASSES.get(cls)
    if both is None:
        both = type(cls.__name__, (cls, TinyadAssertionError), {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": f"{cls.__doc__} (raised under Tape(validation=True), as Taichi's "
                       "TaichiAssertionError)"})
        _VALIDATION_CLASSES[cls] = both
    failure = both.__new__(both)
    failure.__dict__.update(error.__dict__)
    failure.args = error.args
    return failure


_SEED_MISSING = (
    "`seed` is not set for non 0-D field, please specify. `seed` is a list to specify which "
    "parameters the computed derivatives respect to. The length of the `seed` should be same "
    "to that of the `parameters` E.g. Given a loss `loss = ti.field(float, shape=3)`, "
    "parameter `x = ti.field(float, shape=3)`      seed = [0, 0, 1] indicates compute "
    "derivative respect to the third element of `x`.      seed = [1, 1, 1] indicates compute "
    "the sum of derivatives respect to all three element of `x`, i.e., Jacobian-vector "
    "product(Jvp) for each element in `loss`")


class FwdMode:
    """`with ti.ad.FwdMode(loss=y, param=x, seed=[...]): ...`: forward-mode autodiff. On entry
    the duals are cleared (unless clear_gradients=False) and param.dual is set to the seed; the
    kernels launched inside compute y.dual = dy/dx . seed (a Jacobian-vector product); on exit
    the seed is cleared again (Taichi's semantics). A param of one element defaults its seed to
    [1.0]; a param of n elements (vector and matrix components included) needs n seed values."""

    def __init__(self, loss, param, seed=None, clear_gradients=True):
        self.loss = loss
        self.param = param
        self.seed = seed
        self.clear_gradients = clear_gradients
        self.entered = False
        self._token = None

    def __enter__(self):
        if self.entered:
            raise TinyadRuntimeError("Forward mode manager can be entered only once.")
        if active_forward_mode.get() is not None:
            raise TinyadRuntimeError("a FwdMode is already active: tinyad FwdModes do not nest")
        self.entered = True
        if unrequested_grads:
            settle_layout()   # the layout is final now, as at a kernel launch
        losses = self.loss if isinstance(self.loss, (list, tuple)) else [self.loss]
        for fld in (*losses, self.param):
            if not isinstance(fld, Field):
                raise TinyadTypeError(f"FwdMode takes fields for loss and param, got "
                                      f"{type(fld).__name__}")
            if not fld.has_dual:
                raise TinyadRuntimeError(
                    f"{fld.name} has no dual field: forward mode needs one for the loss and "
                    "the parameter", hint=f"declare {fld.name} with needs_dual=True (or call "
                    "ti.root.lazy_dual())")
        self.loss = losses
        size = self.param.dual.data.size
        if not self.seed:
            if size != 1:
                raise TinyadRuntimeError(_SEED_MISSING)
            self.seed = [1.0]
        elif len(self.seed) != size:
            raise TinyadRuntimeError(
                f"the seed has {len(self.seed)} values but {self.param.name} has {size} "
                "elements: give one seed value per element (components included)")
        if self.clear_gradients:
            clear_all_gradients("dual")
        self.param.dual.from_numpy(np.asarray(self.seed, dtype=self.param.dtype.np)
                                   .reshape(self.param.dual.data.shape))
        self._token = active_forward_mode.set(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        active_forward_mode.reset(self._token)
        self.param.dual.fill(0)   # clear the seed, as Taichi does


def grad_replaced(func):
    """Mark a Python function whose gradient is given by a @grad_for function."""
    from tinyad.kernel import Kernel  # noqa: PLC0415  (kernel.py imports the recorder)
    if isinstance(func, Kernel):
        raise TinyadTypeError("Primal function must be a **python** function instead of a "
                              "taichi kernel. Please wrap the taichi kernel in a "
                              "@ti.ad.grad_replaced decorated python function instead.")

    @functools.wraps(func)
    def decorated(*args, **kwargs):
        recorder = active_recorder.get()
        if recorder is None or recorder.records_primal_kernels:
            return func(*args, **kwargs)   # (gradverify's recorder wants the kernels inside)
        from tinyad import customcheck  # noqa: PLC0415  (it imports the interpreter)
        probe = customcheck.probe_for(decorated)   # the first call from this line: checked
        # the kernels inside are not recorded one by one (but for the check, if any)
        token = active_recorder.set(probe.recorder if probe is not None else None)
        try:
            with runtime.backend.checks.custom_primal():
                result = func(*args, **kwargs)
        finally:
            active_recorder.reset(token)
        recorder.record_custom(probe.gradient(decorated.grad) if probe is not None and
                               probe.primal_ran() else decorated.grad,
                               args, kwargs, primal=decorated)
        return result

    def missing_grad(*args, **kwargs):
        raise TinyadRuntimeError(f"{func.__name__} is grad_replaced but has no @ti.ad.grad_for "
                                 "function")
    decorated.grad = missing_grad
    decorated.grad_replaced = True
    return decorated


def grad_for(primal, check=True):
    """`@ti.ad.grad_for(primal)`: this function computes primal's gradient. With the rule
    checks on, it is compared with finite differences of primal once per call site
    (tinyad/customcheck.py); check=False leaves this pair unchecked."""
    if not getattr(primal, "grad_replaced", False):
        # a RuntimeError, as in Taichi (its tests catch that)
        raise TinyadRuntimeError("Primal function must be decorated by ti.ad.grad_replaced")

    def decorator(grad_fn):
        primal.grad = grad_fn
        primal.check_gradient = bool(check)
        return grad_fn
    return decorator


def no_grad(func):
    """A kernel (or Python function) whose gradient is skipped."""
    from tinyad.kernel import Kernel  # noqa: PLC0415
    if isinstance(func, Kernel):
        func.is_no_grad = True
        return func
    wrapped = grad_replaced(func)
    wrapped.grad = lambda *args, **kwargs: None
    return wrapped


def trust(kernel):
    """`ti.ad.trust(kernel)` (or `@ti.ad.trust` above `@ti.kernel`): a gradient kernel written
    by hand that is not compared with tinyad's adjoint of the launch it undoes (a surrogate
    gradient meant to differ; tinyad/check/handgrads.py). -> the kernel."""
    from tinyad.kernel import Kernel  # noqa: PLC0415
    if not isinstance(kernel, Kernel):
        raise TinyadTypeError("ti.ad.trust takes a @ti.kernel (a gradient kernel written by "
                              f"hand), not {type(kernel).__name__}")
    kernel.trust()
    return kernel


def verify(run, loss, params, method="sympy", at=None, **options):
    """Check the autodiff gradient of `loss` w.r.t. `params` against sympy and/or finite
    differences (tinyad/gradverify.py). sympy is imported only when this is called."""
    from tinyad.gradverify import verify as impl  # noqa: PLC0415
    return impl(run, loss, params, method, at, **options)


def formula(run, loss, params=None, **options):
    """The loss that `run()` computes, as a sympy expression (tinyad/gradverify.py)."""
    from tinyad.gradverify import formula as impl  # noqa: PLC0415
    return impl(run, loss, params, **options)


def hvp(run, loss, param, v):
    """H v: the Hessian of `loss` w.r.t. `param` times v (shaped like param), by forward mode
    over reverse mode (tinyad/secondorder.py)."""
    from tinyad.secondorder import hvp as impl  # noqa: PLC0415
    return impl(run, loss, param, v)


def jacobian(run, output, param):
    """d output / d param by forward mode, one sweep per element of param: an array of shape
    output's + param's (tinyad/secondorder.py)."""
    from tinyad.secondorder import jacobian as impl  # noqa: PLC0415
    return impl(run, output, param)


def forward_reverse_check(run, loss, params, seed=0, rtol=None):
    """Forward mode against reverse mode along a random direction, no truth needed: the
    dot-product test <u, J v> == <J^T u, v> (tinyad/gradverify.py)."""
    from tinyad.gradverify import forward_reverse_check as impl  # noqa: PLC0415
    return impl(run, loss, params, seed, rtol)
