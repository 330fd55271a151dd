"""NaN and infinity in a gradient, localized: the check after the adjoint (and tangent) launches.

Detection is a numpy pass over gradients, at compiled speed, in both modes: after each launch
of a manual sweep (kernel.grad()) or a forward-mode launch, over the rows of the gradients
(duals) it wrote; in a Tape, once its backward pass has ended, over the gradients of its
parameters (a NaN upstream flows into them), and only if one holds a new NaN or infinity does
the backward pass run again from its start (the gradients cleared, the loss seeded), each
launch looked at on its own. The launch that first writes a non-finite value is then re-run by
the backend's locator (interp/nanwatch.py; fast mode gets it through tinyad/backend.py's
registry) in the interpreter on copies of its fields, watching every operation, which says
where the value first went non-finite: the adjoint statement, the user's line, the element,
the values, and which primal operation's derivative (or value) it was (tinyad/check/rules.py
`nonfinite_gradient` writes the report). `ti.init(check_nonfinite=False)` turns it off.

A non-finite gradient is an error only where the program uses it, as a parallel conflict is
only where a gradient depends on it (tinyad/check/races.py): the backward pass leaving one
shows its report as a warning (once per bug) and remembers it for each gradient the launch
added to (and those the value flows into); a Python-scope read of one of them (x.grad[i],
x.grad.to_numpy()) that returns a non-finite value, or a kernel that loads one while it holds
a non-finite value (an optimiser step), raises the report, naming the use, until the gradient
is cleared. A program that reads only finite gradients (a NaN left in the gradient of a state
it never reads, as Taichi leaves it too) runs on. A tangent (forward mode) is reported as
its launch writes it.

JAX's `debug_nans` and Warp's `verify_fp` stop at the first non-finite value too, but name an
op of the compiled program, not the user's line in the adjoint; neither says that `0 * inf`
came from the branch `ti.select` did not take.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tinyad.check import rules
from tinyad.check.facts import kernel_facts
from tinyad.check.launches import RowSpans
from tinyad.check.nonfinite_words import nonfinite_unused, nonfinite_used
from tinyad.check.render import print_report
from tinyad.check.sweeps import rows_touched
from tinyad.core import ir
from tinyad.core.srcloc import user_loc

# A gradient of at most this many elements is looked at whole (one numpy call); a larger one
# only in the rows the launch added to, and by a sum (no temporary array).
WHOLE_UP_TO = 1 << 16
PYTHON_UP_TO = 256


@dataclass
class Singular:
    """A primal operation whose value or derivative is not finite at the point it ran at."""
    op: str                   # "sqrt", "log", "truediv", ...
    text: str                 # the operation as printed, e.g. "sqrt(x[i])"
    args: tuple               # its operands' values
    value: float              # its value
    partials: tuple           # d(value)/d(arg) per operand (None: no partial)
    # where the operation sits in a choice that did not pick it: (the choice as printed, its
    # condition as printed, the condition's value) for `ti.select`; None when it was picked
    untaken: tuple | None = None
    arg_texts: tuple = ()     # its operands as printed
    loc: object = None        # where the user wrote it


@dataclass
class Origin:
    """The first operation of the re-run launch that made a non-finite value of finite ones."""
    text: str                 # the operation as printed ("0.5 / t")
    operands: tuple           # (printed operand, value) pairs
    value: float
    stmt: str                 # the statement of the derivative kernel it belongs to
    loc: object               # the user's line that statement comes from
    singular: Singular | None = None     # the primal operation at that line it derives from


@dataclass
class NonFinite:
    """What the watched re-run found: the first write of a non-finite value into a gradient
    (or tangent), and where that value came from."""
    field: object             # the .grad (.dual) field written
    element: tuple
    value: float
    stmt: str                 # the writing statement, as the derivative kernel prints it
    loc: object
    iteration: int | None
    origin: Origin | None = None
    # no operation made it: (field, element, value) of the non-finite value the launch loaded
    loaded: tuple | None = None
    notes: list = field(default_factory=list)


def first_nonfinite(data: np.ndarray):
    """-> (index, value) of the first NaN or infinity in `data`, or None. A sum first where
    `data` is large: finite for nearly every gradient, one pass without a temporary array (an
    overflow of the sum itself falls through to the exact test)."""
    if data.dtype.kind != "f" or data.size == 0:
        return None
    if data.size <= PYTHON_UP_TO:      # (a few floats: Python's sum beats two numpy calls)
        if math.isfinite(sum(data.ravel().tolist())):
            return None
    elif data.size <= WHOLE_UP_TO:
        if np.isfinite(data).all():
            return None
    else:
        with np.errstate(all="ignore"):
            if math.isfinite(data.sum()):
                return None
    bad = np.argwhere(~np.isfinite(data))
    if len(bad) == 0:
        return None
    index = tuple(int(i) for i in bad[0])
    return index, data[index].item()


@dataclass
class Owed:
    """The report a gradient's non-finite values are owed to, raised when they are used."""
    error: object             # the NonFiniteGradientError
    host: object              # field -> its host array (the backend's)


class NonFiniteChecks:
    """The non-finite check's part of a backend's rule checker (a base before LaunchChecker):
    whether to look (ti.init's check_nonfinite), the gradients (duals) found holding a NaN or
    an infinity until next cleared, the report each one's values are owed to, and a Tape's
    launches looked at when its backward ends."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.checks_nonfinite = True
        self.nonfinite_seen: dict = {}
        self.nonfinite_owed: dict = {}    # grad field -> Owed, until cleared
        self.nonfinite_warned: set = set()
        self.nonfinite_batch: Batch | None = None
        self.nonfinite_batching = False   # while a Tape's backward that can run again runs
        self.lost.used, self.lost.loaded = self.gradient_used, self.gradients_loaded

    def gradients_cleared(self, grads, time: int, fields_set=()) -> None:
        super().gradients_cleared(grads, time, fields_set)
        if self.nonfinite_seen or self.nonfinite_owed:     # (empty, mostly)
            for grad in grads:
                self.nonfinite_seen.pop(grad, None)
                self.nonfinite_owed.pop(grad, None)
            for fld in fields_set:       # (a dual set by a Tape, as python_write)
                self.nonfinite_seen.pop(fld, None)

    def nonfinite_found(self, error, grads, host) -> None:
        """The backward pass left the non-finite gradient `error` reports, in `grads`: a
        warning now (once per bug, in either mode), the error when one of them is used."""
        report = error.report
        key = (report.kernel, report.field, report.write.loc if report.write else None)
        if key not in self.nonfinite_warned:
            self.nonfinite_warned.add(key)
            print_report(nonfinite_unused(report))
        for grad in grads:
            self.nonfinite_owed.setdefault(grad, Owed(error, host))

    def gradient_used(self, grad, index=None, loc=None, kernel=None) -> None:
        """Python scope (`kernel` None) or a kernel reads `grad` (element `index`; None: all
        of it): if it holds a non-finite value a report is owed for, that report now."""
        owed = self.nonfinite_owed.get(grad)
        if owed is None:
            return
        data = owed.host(grad)
        if index is not None:
            value = np.asarray(data[index])
            found = first_nonfinite(value.reshape(-1))
            element, value = index, found and found[1]
        else:
            found = first_nonfinite(data)
            element, value = found if found is not None else (None, None)
        if found is None:
            return
        self.report(rules.NonFiniteGradientError(nonfinite_used(
            owed.error.report, gradient=grad.name, element=element, value=value,
            loc=loc or user_loc(), kernel=kernel)))

    def gradients_loaded(self, facts, kernel_name: str) -> None:
        """A forward launch loads gradients: a gradient kernel written by hand (it writes
        gradients too) carries what they owe on into those; any other kernel uses them."""
        if not self.nonfinite_owed:       # (empty, mostly)
            return
        owed = [self.nonfinite_owed[g] for g in facts.grads_loaded if g in self.nonfinite_owed]
        if not owed:
            return
        if facts.grads_by_hand:
            for grad in facts.grads_by_hand:
                self.nonfinite_owed.setdefault(grad, owed[0])
            return
        for grad in facts.grads_loaded:
            self.gradient_used(grad, None, facts.first_grad_load.get(grad), kernel_name)

    def twin_written(self, fld) -> None:
        # (a Python-scope write of a gradient clears it: gradients_cleared forgets it there;
        # a primal's write, which is most, passes through no override here)
        if self.nonfinite_seen:
            self.nonfinite_seen.pop(fld, None)
        super().twin_written(fld)


def finish_batch(checker) -> None:
    """A Tape's backward pass has run and the checker's other checks of it are done (the Tape
    calls this where a batch is left, tinyad/ad.py): the batch's launches looked at."""
    batch, checker.nonfinite_batch = checker.nonfinite_batch, None
    batch.finish()


class Relocate(Exception):
    """A Tape's gradients hold a new NaN or infinity: its backward pass is to run again from
    its start, each launch looked at on its own (tinyad/ad.py Tape.grad catches it)."""


def after_launch(checker, traced, variant: str, scalars, launch, backend) -> None:
    """After an adjoint (or tangent) launch: a NaN or infinity new in the gradients it added
    to (the duals it wrote) is located and reported (raised, or shown in warn mode). In a
    Tape's backward pass that can run again (`checker.nonfinite_batching`, set by the Tape)
    the launches are only noted, and their gradients looked at once when it ends
    (finish_batch, which the Tape calls once its checks of the pass are done): a pass per Tape
    over the gradients of its parameters, not one per launch over every gradient. The
    `backend` gives a field's host array and the re-run that locates a value
    (interp/nanwatch.py). Called only where `checker.checks_nonfinite` (tinyad/launch.py
    asks)."""
    if variant == "adjoint" and checker.nonfinite_batching:
        batch = checker.nonfinite_batch
        if batch is None:
            batch = checker.nonfinite_batch = Batch(checker, backend.storage.to_host,
                                                    backend.locate_nonfinite,
                                                    (traced, variant, scalars, launch))
        batch.kernels.append(traced)     # (one object per launch, none new: its kernel)
        return
    # One launch: no container made unless something is found (a launch's few allocations
    # would set Python's cyclic collector off over the checker's many objects, again and again)
    seen, host = checker.nonfinite_seen, backend.storage.to_host
    for target, how in traced.memos[_WATCHED[variant]]:
        if target in seen:
            continue
        if how is _SUM:      # (a few floats: the backend's look, compiled in fast mode)
            if backend.all_finite(host(target)):
                continue
        elif (first_nonfinite(host(target)) if how is _WHOLE else _first_in(
                host(target), _rows_added_to(launch, target))) is None:
            continue
        Batch(checker, host, backend.locate_nonfinite, (traced, variant, scalars, launch)).finish()
        return


class Batch:
    """Derivative launches whose gradients are looked at together."""

    def __init__(self, checker, host, locate, first):
        self.checker, self.host, self.locate = checker, host, locate
        # the first launch (traced, variant, scalars, its record or None), and in a Tape's
        # backward, the kernel of each adjoint launch (all of them "adjoint")
        self.first, self.kernels = first, []

    def finish(self) -> None:
        """One launch: look at the rows of the gradients it added to, and report a new NaN or
        infinity there. A Tape's launches: look at the gradients of its parameters (the
        fields none of its launches wrote; all, where there are none), and raise Relocate
        if one holds a new NaN or infinity."""
        checker = self.checker
        single = len(self.kernels) <= 1
        if single:
            traced, variant, _, launch = self.first
            targets = {t: _rows_added_to(launch, t) if variant == "adjoint" else None
                       for t in _targets(traced, variant)}
        else:
            targets = dict.fromkeys(_parameters(dict.fromkeys(self.kernels)))
        for target, rows in targets.items():
            if target in checker.nonfinite_seen:
                continue      # seen, and not cleared since: said already
            found = _first_in(self.host(target), rows)
            if found is None:
                continue
            if not single:
                raise Relocate(target, *found, self.host)
            finding = self._located(self.first, target, found)
            # (None found: the value was there before, or came in through a gradient the
            # launch loaded and then zeroed, such as y.grad in the adjoint of y[i] = f(x[i]))
            traced, variant = self.first[:2]
            error = self._report(self.first, finding) if finding is not None else \
                _inherited(checker, traced, variant) if variant == "adjoint" else None
            for other in targets:       # (a non-finite value flows on: said once)
                checker.nonfinite_seen[other] = checker.tick()
            if error is not None:
                checker.nonfinite_found(error, targets, self.host)
            return

    def _located(self, launched, target, found):
        """What re-running `launched` in the interpreter finds (None: the launch wrote no
        non-finite value: it was there before)."""
        traced, variant, scalars, _ = launched
        try:
            return self.locate(traced, variant, scalars, _targets(traced, variant))
        except Exception as exc:  # noqa: BLE001  (the report goes out without the location)
            return unlocated(target, found, f"the re-run in the interpreter failed ({exc})")

    def _report(self, launched, finding):
        """A tangent's `finding` is reported now; a gradient's -> the error its gradients owe
        (that of the gradient it flowed in from, where that was reported already)."""
        traced, variant, _, launch = launched
        checker = self.checker
        if _already_reported(checker, finding):
            owed = checker.nonfinite_owed.get(finding.loaded[0])
            return owed and owed.error
        error = rules.nonfinite_gradient(
            kernel=traced.ir.name, variant=variant, finding=finding,
            launch=None if launch is None else launch.number,
            writer=_writer(checker, finding))
        if variant != "adjoint":
            checker.report(error)
            return None
        return error


def unlocated(target, found, why: str) -> NonFinite:
    """A non-finite value found in `target` ((index, value) `found`) but not traced."""
    index, value = found
    return NonFinite(field=target, element=index, value=value, stmt="", loc=None,
                     iteration=None, notes=[f"not located: {why}"])


def relocation_failed(checker, relocate: Relocate, kernel: str) -> None:
    """The Tape's backward ran again launch by launch and no launch wrote the non-finite
    value its first run left: reported without its line."""
    target, index, value, host = relocate.args
    checker.nonfinite_found(rules.nonfinite_gradient(
        kernel=kernel, variant="adjoint", launch=None, writer=None,
        finding=unlocated(target, (index, value), "the backward pass run again launch by "
                                                  "launch wrote no such value")), [target], host)


def _parameters(kernels) -> list:
    """The gradients the adjoints of `kernels` added to whose primal none of their forward
    launches wrote (a Tape's parameters); all of them where there is none."""
    written, targets = set(), {}
    for traced in kernels:
        written.update(kernel_facts(traced).written)
        targets.update(dict.fromkeys(_targets(traced, "adjoint")))
    leaves = [t for t in targets if t.primal not in written]
    return leaves or list(targets)


def _first_in(data, rows):
    """first_nonfinite over the rows (lo, hi) of `data` (None: all), with its full index."""
    if rows is None:
        return first_nonfinite(data)
    found = first_nonfinite(data[rows[0]:rows[1]])
    if found is None:
        return None
    index, value = found
    return (index[0] + rows[0], *index[1:]), value


def _targets(traced, variant: str) -> tuple:
    """The fields whose new non-finite values the check looks for."""
    if variant == "adjoint":
        return kernel_facts(traced).adjoint_targets
    written = traced.memos[_duals_written]
    if variant not in written:
        written[variant] = tuple(f for f in ir.fields_written(traced.variant_ir(variant).body)
                                 if f.role == "dual")
    return written[variant]


# How after_launch looks at a target: the backend's look at its few floats (all_finite: one
# Python sum, a compiled loop in fast mode), one numpy pass over it whole, or over the rows
# the launch added to
_SUM, _WHOLE, _ROWS = "sum", "whole", "rows"


def _watched(traced, variant: str) -> tuple:
    """(target, how it is looked at) per float field `_targets` gives (no other holds a NaN):
    a tangent's duals and a small gradient whole after each launch, a few floats by a sum.
    Worked out once per kernel and variant (its memos, by _WATCHED: one lookup per launch)."""
    return tuple((t, _how_watched(t, variant)) for t in _targets(traced, variant)
                 if np.dtype(t.dtype.np).kind == "f")


def _adjoint_watched(traced) -> tuple:
    return _watched(traced, "adjoint")


def _tangent_watched(traced) -> tuple:
    return _watched(traced, "tangent")


_WATCHED = {"adjoint": _adjoint_watched, "tangent": _tangent_watched}


def _how_watched(target, variant: str) -> str:
    size = ir.array_size(target)
    if size <= PYTHON_UP_TO:
        return _SUM
    return _WHOLE if variant != "adjoint" or size <= WHOLE_UP_TO else _ROWS


# Filled in per variant as variants launch, and kept in the kernel's memos:

def _duals_written(traced) -> dict:
    """variant -> the dual fields its IR writes."""
    return {}


def _derivatives_loaded(traced) -> dict:
    """variant -> the gradient and dual fields its IR touches."""
    return {}


def _inherited(checker, traced, variant: str):
    """The error owed by a gradient the derivative launch loads (None: none is owed)."""
    loaded = traced.memos[_derivatives_loaded]
    if variant not in loaded:
        loaded[variant] = tuple(f for f in ir.fields_of(traced.variant_ir(variant).body)
                                if f.role in ("grad", "dual"))
    owed = next((checker.nonfinite_owed[f] for f in loaded[variant]
                 if f in checker.nonfinite_owed), None)
    return owed and owed.error


def _rows_added_to(launch, grad):
    """(lo, hi) of the leading indices of `grad` an adjoint of `launch` adds to: the rows the
    forward launch read of its primal (a time-indexed field's one or two steps, not all of
    them); None: the whole field."""
    if launch is None or ir.array_size(grad) <= WHOLE_UP_TO:      # (small: all of it)
        return None
    rows = rows_touched(launch)[0].get(grad.primal)
    if not rows:
        return None
    if isinstance(rows, RowSpans):
        spans = rows.spans
        return (min(lo for lo, _ in spans), max(hi for _, hi in spans)) if spans else None
    firsts = [r[0] if isinstance(r, tuple) else r for r in rows]
    if any(isinstance(r, tuple) for r in firsts):      # (a row that is not one index)
        return None
    return int(min(firsts)), int(max(firsts)) + 1


def _already_reported(checker, finding: NonFinite) -> bool:
    """A non-finite value that came in through a gradient (a tangent) already reported."""
    if finding.origin is not None or finding.loaded is None:
        return False
    source = finding.loaded[0]
    return source.role != "primal" and source in checker.nonfinite_seen


def _writer(checker, finding: NonFinite):
    """Where a non-finite primal value the launch loaded was last written (None: unknown)."""
    if finding.loaded is None or finding.loaded[0].role != "primal":
        return None
    return checker.primal_changed.get(finding.loaded[0])
