"""The autodiff rules tinyad checks: one error class per kind of violation, and one constructor
per rule that writes its report (title, explanation, fix). The checks that find violations live
with the backend that runs kernels (interp/accesslog.py, tinyad/check/launches.py, compile/replaycheck.py) and call these
constructors with what they saw.

Why these rules are exactly the conditions for a right gradient (tinyad/autodiff/reverse.py): an
adjoint kernel recomputes every value it needs from the fields as they are when it runs, and the
adjoint of a store hands the gradient on and zeroes it. So a gradient is right when
  (1) every load the adjoint replays reads what the forward read (no element the adjoint relies on
      is changed between its read and the adjoint),
  (2) no two iterations of a parallel loop depend on each other through an element,
  (3) every field on the derivative path has a gradient and the outputs are seeded.
Each violation class below is one way to break these.

Adding a rule: a constructor here (its text), an error class if no existing one fits, and a call
where the backend can see the violation.
"""
from __future__ import annotations

import dataclasses
import math

from tinyad.check.report import ACCUMULATE, Access, Report, element_name, format_value
from tinyad.core.errors import AutodiffRuleError, KernelSimplicityRuleError
from tinyad.core.srcloc import SrcLoc, user_loc


class RuleViolation(AutodiffRuleError):
    """An AutodiffRuleError carrying a Report; its message is the plain-text report."""

    def __init__(self, report: Report):
        self.report = report
        access = report.write or report.read
        loc = access.loc if access is not None else user_loc()
        text = str(report)
        if access is None and loc is not None:   # the report names no line: show the user's call
            text += "\n" + loc.snippet()
        super().__init__(text, loc)

    def _render(self) -> str:
        return self.message


class ReadThenOverwriteRuleError(RuleViolation):
    """Global Data Access Rule 1: an element the adjoint needs was changed after it was read."""


class SecondWriteRuleError(RuleViolation):
    """Global Data Access Rule 2: a second, non-accumulating write destroyed a value that was
    read."""


class ReadDuringAccumulationRuleError(RuleViolation):
    """An element was read while it was still being accumulated into (+=)."""


class ParallelConflictRuleError(RuleViolation):
    """Two iterations of a parallel loop depend on each other through one element."""


class ReplayDivergenceRuleError(RuleViolation):
    """The adjoint kernel's replay read a value different from the one the forward read."""


class StaleGradientRuleError(RuleViolation):
    """A gradient that adds up derivatives taken at two different parameter values."""


class NonFiniteGradientError(RuleViolation):
    """A gradient (or a tangent) became NaN or infinite in a derivative kernel: where, and why
    (tinyad/check/nonfinite.py finds it)."""


class SilentZeroRuleError(RuleViolation):
    """A gradient would silently be zero or doubled: unseeded outputs, a field without
    gradient on the path, adjoints run out of order, a value passed around the tape."""


# ---- an element changed between a read and the adjoint that replays it ----------------------

def _replayed_read_sees(name: str, read: Access, write: Access) -> str:
    return (f"the adjoint replays the read at line {read.loc.line} and would see {name} = "
            f"{format_value(write.value)} instead of {format_value(read.value)}, so every "
            "gradient that flows through that read would be computed at the wrong value")


def read_then_overwrite(*, field: str, element: tuple, read: Access,
                        write: Access) -> ReadThenOverwriteRuleError:
    """Global Data Access Rule 1, inside a kernel: `write` changed what `read` read."""
    name = element_name(field, element)
    return ReadThenOverwriteRuleError(Report(
        rule="Global Data Access Rule 1",
        summary=f"{name} was read, then changed before the adjoint used the value read.",
        kernel=write.kernel, field=field, element=element, read=read, write=write,
        consequence=_replayed_read_sees(name, read, write),
        fix=f"keep the value the adjoint needs: write the new value to another field or to a "
            f"time-indexed slot ({field}[t + 1] = ... rather than overwriting {field}[t]), or "
            f"update {field} in a kernel outside the Tape"))


def python_overwrite(*, field: str, element: tuple, read: Access,
                     write: Access) -> ReadThenOverwriteRuleError:
    """Global Data Access Rule 1, from Python scope: a field read in the Tape was changed."""
    name = element_name(field, element)
    return ReadThenOverwriteRuleError(Report(
        rule="Global Data Access Rule 1",
        summary=f"{name} was read by a kernel in this Tape, then changed in Python scope.",
        kernel=read.kernel, field=field, element=element, read=read, write=write,
        consequence=_replayed_read_sees(name, read, write),
        fix="change fields before the Tape starts, or after it ends"))


def second_write(*, field: str, element: tuple, read: Access, write: Access,
                 first_write: Access) -> SecondWriteRuleError:
    """Global Data Access Rule 2: written, read, then written again without +=."""
    name = element_name(field, element)
    return SecondWriteRuleError(Report(
        rule="Global Data Access Rule 2",
        summary=f"{name} was written, read, then written again without +=.",
        kernel=write.kernel, field=field, element=element, read=read, write=write,
        earlier=[first_write], consequence=_replayed_read_sees(name, read, write),
        fix="write each element once and accumulate with +=: compute the final value in a "
            "local and store it once (e.g. loss[None] = (a + b) * c), or keep each "
            "intermediate result in its own field"))


def read_during_accumulation(*, field: str, element: tuple, read: Access, write: Access,
                             first_accumulation: Access) -> ReadDuringAccumulationRuleError:
    """An element read between two of the += that build it."""
    name = element_name(field, element)
    return ReadDuringAccumulationRuleError(Report(
        rule="Read during accumulation",
        summary=f"{name} was read while it was still being accumulated into with +=.",
        kernel=write.kernel, field=field, element=element, read=read, write=write,
        earlier=[first_accumulation], consequence=_replayed_read_sees(name, read, write),
        fix="finish the accumulation first: read the total in a later kernel, after every += "
            "into it"))


# ---- parallel loops and replays --------------------------------------------------------------

def parallel_conflict(*, kernel: str, field: str, element: tuple, earlier: Access,
                      later: Access) -> ParallelConflictRuleError:
    """Two iterations of one parallel loop touched an element in conflicting ways."""
    name = element_name(field, element)
    read = next((a for a in (earlier, later) if a.kind == "read"), None)
    if read is not None:
        write = later if read is earlier else earlier
        summary = (f"iteration {write.iteration} of a parallel loop writes {name}, which "
                   f"iteration {read.iteration} reads.")
        story = []
    else:
        write, story = later, [earlier]
        summary = (f"iterations {earlier.iteration} and {later.iteration} of a parallel loop "
                   + (f"both store {name}." if earlier.kind == later.kind == "store" else
                      f"update {name} with {earlier.kind} and {later.kind}."))
    return ParallelConflictRuleError(Report(
        rule="Parallel loop conflict", summary=summary, kernel=kernel, field=field,
        element=element, read=read, write=write, earlier=story, write_replaces_read=False,
        consequence="iterations of a parallel loop run in any order (and their adjoints in "
                    "yet another), so the result and its gradient depend on the schedule",
        fix="make the iterations independent: write results to a separate field (y[i] = "
            "f(x[i - 1]) instead of x[i] = f(x[i - 1])), accumulate with +=, or run the loop "
            "in order with ti.loop_config(serialize=True)"))


def overwrite_after_read(*, field: str, element: tuple, read: Access, write: Access,
                         first_write: Access | None, first_accumulation: Access | None):
    """The rule `write` breaks by changing an element after `read`, whose value the adjoint
    replays, given the element's first write and first accumulation before that read (None if
    none): a read between two accumulations, a plain write after an earlier write, or Rule 1.
    Every checker names an overwrite with this one choice."""
    if write.kind in ACCUMULATE and first_accumulation is not None:
        return read_during_accumulation(field=field, element=element, read=read, write=write,
                                        first_accumulation=first_accumulation)
    if first_write is not None and write.kind not in ACCUMULATE:
        return second_write(field=field, element=element, read=read, write=write,
                            first_write=first_write)
    return read_then_overwrite(field=field, element=element, read=read, write=write)


def replay_divergence(*, kernel: str, field: str, element: tuple, read: Access, now,
                      last_writer: Access | None) -> ReplayDivergenceRuleError:
    """The adjoint of `kernel` replays `read` and finds `now` instead of the value read."""
    name = element_name(field, element)
    if last_writer is None:
        cause = "it was changed after the forward ran"
    elif last_writer.kernel is None:
        cause = "a Python-scope write changed it after the forward ran"
    else:
        cause = f"kernel {last_writer.kernel} changed it after the forward ran"
    write = None if last_writer is None else Access(
        kind=last_writer.kind, loc=last_writer.loc, kernel=last_writer.kernel,
        launch=last_writer.launch, iteration=last_writer.iteration, value=now,
        time=last_writer.time)
    return ReplayDivergenceRuleError(Report(
        rule="Replay divergence",
        summary=f"the adjoint of {kernel} replays a read of {name} and finds "
                f"{format_value(now)}, but the forward read {format_value(read.value)}: {cause}.",
        kernel=kernel, field=field, element=element, read=read, write=write,
        consequence=f"the gradient of {kernel} would be computed at {name} = {format_value(now)}",
        fix="run the forward kernel again right before .grad(), and change no field it reads "
            "between the forward and its gradient (launch such kernels outside the Tape, after "
            "it)"))


def custom_gradient_reads_changed(*, gradient: str, kernel: str, field: str, element: tuple,
                                  read: Access, now, last_writer: Access | None
                                  ) -> ReplayDivergenceRuleError:
    """A grad_for function's kernel reads an element its grad_replaced function's forward
    kernels read, and it has changed since they ran."""
    name = element_name(field, element)
    cause = ("it was changed" if last_writer is None else "a Python-scope write changed it"
             if last_writer.kernel is None else f"kernel {last_writer.kernel} changed it")
    write = None if last_writer is None else dataclasses.replace(last_writer, value=now)
    return ReplayDivergenceRuleError(Report(
        rule="Replay divergence",
        summary=f"the custom gradient {gradient} runs {kernel}, which reads {name} = "
                f"{format_value(now)}, but the forward read {format_value(read.value)}: "
                f"{cause} after the forward ran.",
        kernel=kernel, field=field, element=element, read=read, write=write,
        consequence=f"the custom gradient would be computed at {name} = {format_value(now)}",
        fix=f"change no field the forward read until {gradient} has run (write the new value "
            "to another field or a time-indexed slot, or launch that kernel after the Tape)"))


def random_in_adjoint(*, kernel: str, loc: SrcLoc) -> ReplayDivergenceRuleError:
    """A kernel's gradient depends on ti.random(), which its adjoint would draw anew."""
    return ReplayDivergenceRuleError(Report(
        rule="Replay divergence",
        summary=f"{kernel}'s gradient depends on ti.random(), which the adjoint kernel would "
                "draw anew.",
        kernel=kernel, read=Access(kind="random", loc=loc, kernel=kernel),
        consequence="the adjoint would use different random numbers than the forward did",
        fix="draw the random numbers into a field in a kernel before the Tape (or outside the "
            "differentiated kernels) and read them from there"))


# ---- gradients silently zero or doubled ------------------------------------------------------

def custom_gradient_assigns(*, field: str, element: tuple, write: Access,
                            discarded) -> SilentZeroRuleError:
    """A grad_for function stored into a gradient that already held `discarded`."""
    return SilentZeroRuleError(Report(
        rule="Custom gradient assigns",
        summary=f"a grad_for function assigns {element_name(field, element)} instead of "
                "accumulating into it.",
        field=field, element=element, write=write,
        consequence=f"the {format_value(discarded)} already in {field} (from other kernels) is "
                    "thrown away",
        fix=f"accumulate: {field}[i] += ... instead of {field}[i] = ..."))


def value_passed_around_tape(*, kernel: str, argument: str, field: str, element: tuple,
                             read: Access) -> SilentZeroRuleError:
    """A field value read in Python scope inside a Tape, then passed as a kernel argument."""
    name = element_name(field, element)
    return SilentZeroRuleError(Report(
        rule="Value passed around the tape",
        summary=f"{kernel}'s argument '{argument}' is {name}, read in Python scope inside the "
                "Tape: the gradient through it is lost.",
        kernel=kernel, field=field, element=element, read=read,
        consequence=f"{field}.grad gets nothing from {kernel}'s use of '{argument}'",
        fix=f"read {name} inside the kernel instead of passing it as an argument (or read it "
            "before the Tape if it is meant as a constant)"))


def missing_gradient_on_path(*, kernel: str, field: str, read_loc: SrcLoc,
                             written_at: SrcLoc, writer: str | None = None) -> SilentZeroRuleError:
    """A field without needs_grad holds values derived from differentiated fields."""
    return SilentZeroRuleError(Report(
        rule="Missing gradient on the path",
        summary=f"{field} carries values that depend on differentiated fields, but it has no "
                "gradient field: gradients through it are silently zero.",
        kernel=kernel, field=field,
        read=Access(kind="read", loc=read_loc, kernel=kernel),
        write=Access(kind="store", loc=written_at, kernel=writer or kernel),
        consequence=f"everything upstream of {field} gets no gradient from this kernel",
        fix=f"declare {field} with needs_grad=True (or call ti.root.lazy_grad()), or read it "
            f"as ti.stop_grad({field}[...]) where the gradient is meant to stop there"))


def missing_dual_on_path(*, kernel: str, field: str, store_loc: SrcLoc) -> SilentZeroRuleError:
    """Forward mode: a value that carries a tangent is stored into a field without .dual."""
    return SilentZeroRuleError(Report(
        rule="Missing dual on the path",
        summary=f"{field} is assigned a value that carries a tangent, but it has no dual "
                "field: forward mode drops the tangent here (Taichi does so silently).",
        kernel=kernel, field=field,
        write=Access(kind="store", loc=store_loc, kernel=kernel),
        consequence=f"every .dual downstream of {field} misses this contribution",
        fix=(f"declare {field.removesuffix('.grad')} with needs_grad=True and needs_dual=True "
             "(its gradient then has a dual too)" if field.endswith(".grad") else
             f"declare {field} with needs_dual=True (or call ti.root.lazy_dual())")))


def _called_at(call: SrcLoc | None) -> list:
    """The user's `kernel.grad()` line, as the first line of a report about that call."""
    return [Access(kind="call", loc=call)] if call is not None else []


def no_output_gradient(*, kernel: str, call: SrcLoc | None = None) -> Report:
    """kernel.grad() on a kernel that writes no field with a gradient. A warning, not an error:
    zero is the true gradient of such a kernel (Taichi's test_mod calls .grad() on one)."""
    return Report(
        rule="Unseeded gradient (warning)",
        summary=f"{kernel} writes no field that has a gradient, so {kernel}.grad() can only "
                "produce zeros.",
        kernel=kernel, earlier=_called_at(call), consequence="every gradient it computes is zero",
        fix="declare the kernel's output fields with needs_grad=True")


def unseeded_outputs(*, kernel: str, outputs: list[str], first_store: SrcLoc,
                     call: SrcLoc | None = None) -> Report:
    """kernel.grad() while every output adjoint is zero and no gradient holds a value. A warning,
    not an error: zero may be the true gradient (Taichi's test_violate_kernel_simplicity1/2
    call .grad() with nothing seeded)."""
    names = ", ".join(f"{name}.grad" for name in outputs)
    return Report(
        rule="Unseeded gradient (warning)",
        summary=f"{kernel}.grad() runs with every output adjoint zero ({names}) and no "
                "gradient seeded anywhere.",
        kernel=kernel, field=outputs[0], earlier=_called_at(call),
        write=Access(kind="store", loc=first_store, kernel=kernel),
        consequence="all gradients it produces are zero (right only if nothing was meant to "
                    "flow back)",
        fix=f"seed the output first, e.g. {outputs[0]}.grad[None] = 1 for a 0-D loss, or use "
            "ti.ad.Tape(loss)")


def adjoints_out_of_order(*, kernel: str, launch: int, later_kernel: str, later_launch: int,
                          field: str) -> SilentZeroRuleError:
    """kernel.grad() before the gradient of a later launch that read its output."""
    return SilentZeroRuleError(Report(
        rule="Adjoints out of order",
        summary=f"{later_kernel} (launch #{later_launch}) read {field} after {kernel} "
                f"(launch #{launch}) wrote it, and its gradient has not run yet.",
        kernel=kernel, field=field,
        consequence=f"{field}.grad is still missing {later_kernel}'s contribution, so "
                    f"{kernel}.grad() would pass on an incomplete gradient",
        fix=f"call the .grad() of later kernels first: {later_kernel}.grad() before "
            f"{kernel}.grad() (reverse launch order), or use ti.ad.Tape"))


def gradient_accumulates_across_rounds(*, kernel: str, gradient: str,
                                       call_loc: SrcLoc | None) -> Report:
    """A warning, not an error: the sum over rounds may be what the user wants."""
    return Report(
        rule="Gradient accumulates across rounds (warning)",
        summary=f"{gradient} still holds the gradient of an earlier round when "
                f"{kernel}.grad() adds this round's.",
        kernel=kernel, field=gradient, write=Access(kind="python call", loc=call_loc),
        consequence=f"{gradient} is the sum of several rounds, not this round's gradient",
        fix=f"clear it between rounds ({gradient}.fill(0) or ti.ad.clear_all_gradients()), "
            "unless the sum is what you want")


def adjoint_run_twice(*, kernel: str, launch: int, gradient: str,
                      call_loc: SrcLoc | None) -> Report:
    """A warning, not an error: a second kernel.grad() for one forward launch adds its
    gradient again (wanted when the seed changed in between and the sum is the point)."""
    return Report(
        rule="Adjoint run twice (warning)",
        summary=f"{kernel}.grad() runs again for forward launch #{launch}, whose adjoint has "
                f"already added to {gradient}, and {gradient} was not cleared since.",
        kernel=kernel, field=gradient, write=Access(kind="python call", loc=call_loc),
        consequence=f"{gradient} holds that launch's gradient twice (Taichi adds it twice too, "
                    "silently)",
        fix=f"call {kernel}.grad() once per forward launch, or clear {gradient} before the "
            "second call (a new seed: a new gradient)")


def gradient_at_two_points(*, kernel: str, gradient: str, param: str, earlier: Access,
                           change: Access | None, call_loc: SrcLoc | None
                           ) -> StaleGradientRuleError:
    """A manual sweep adds to a gradient that still holds an earlier sweep's result, taken
    before the parameter changed: the sum mixes the derivatives at two points."""
    return StaleGradientRuleError(Report(
        rule="Gradient at two parameter values",
        summary=f"{gradient} still holds the gradient at an earlier value of {param}, and "
                f"{kernel}.grad() now adds the gradient at its new value.",
        kernel=kernel, field=gradient, write=change,
        earlier=[earlier, Access(kind="added to it again", loc=call_loc)],
        consequence=f"{gradient} would be the sum of the derivatives at two different values "
                    f"of {param}: the gradient at neither",
        fix=f"clear {gradient} before each sweep ({gradient}.fill(0) or "
            "ti.ad.clear_all_gradients()), for example right after the optimiser step that "
            f"changes {param}"))


def computed_before_tape(*, field: str, source: str, write_loc: SrcLoc, kernel: str,
                         taped_kernel: str, read_loc: SrcLoc) -> Report:
    """A warning, not an error: a kernel launched before the Tape computed a field from a
    parameter; the Tape's gradient stops at that field. It may be meant (a constant)."""
    return Report(
        rule="Computed before the Tape (warning)",
        summary=f"{field} was computed from {source} by {kernel} before the Tape started, and "
                f"the taped kernel {taped_kernel} reads it.",
        kernel=taped_kernel, field=field,
        write=Access(kind="store", loc=write_loc, kernel=kernel),
        read=Access(kind="read", loc=read_loc, kernel=taped_kernel),
        write_replaces_read=False,
        consequence=f"the Tape differentiates only what runs inside it: the gradient reaches "
                    f"{field}.grad and stops there, so {source}.grad gets nothing through "
                    f"{field}",
        fix=f"launch {kernel} inside the Tape, or compute {field} from a copy of {source} "
            f"without needs_grad if {field} is meant to be a constant")


# ---- NaN and infinity in a gradient ------------------------------------------------------------

# How to keep an op's argument where its value and derivative are finite, `{0}` its argument
_GUARDS = {"sqrt": "ti.sqrt(ti.max({0}, 1e-12))", "log": "ti.log(ti.max({0}, 1e-12))",
           "rsqrt": "ti.rsqrt(ti.max({0}, 1e-12))", "exp": "ti.exp(ti.min({0}, 80.0))",
           "asin": "ti.asin(ti.min(ti.max({0}, -0.999999), 0.999999))",
           "acos": "ti.acos(ti.min(ti.max({0}, -0.999999), 0.999999))",
           "truediv": "{0} / ti.max({1}, 1e-12)", "pow": "ti.max({0}, 1e-12) ** {1}"}
_WAY_OUT = ("If NaN or infinite gradients are intended, ti.init(check_nonfinite=False) turns "
            "this check off.")


def _singular_words(s, result) -> tuple[str, str]:
    """(what is not finite, how the derivative kernel made `result` of it) for a primal
    operation `s` (tinyad/check/nonfinite.py Singular)."""
    at = ", ".join(format_value(a) for a in s.args)
    infinite = next((p for p in s.partials if p is not None and math.isinf(p)), None)
    if not math.isfinite(s.value):
        what = f"{s.text} = {format_value(s.value)} at {at}"
    else:
        shown = "nan" if infinite is None else format_value(infinite)
        what = f"{s.op}'({at}) = {shown}, the derivative of {s.op} at {at}"
    if s.untaken is not None:
        _, cond, value = s.untaken
        return (f"0 * ({what}) in the branch ti.select did not take",
                f"ti.select did not take {s.text} ({cond} is {value} here), so the adjoint "
                "flowing into it is 0, and 0 times an infinite or NaN derivative is NaN (both "
                "branches of a select are differentiated)")
    if not math.isfinite(s.value):
        return what, ("the forward pass computes this value itself (what it feeds is not "
                      "finite either), and the derivative there is not finite")
    zero = " (and inf * 0 is NaN)" if infinite is not None and math.isnan(result) else ""
    return what, f"the adjoint multiplies the gradient flowing back by that derivative{zero}"


def _nonfinite_fix(s) -> str:
    guard = _GUARDS.get(s.op)
    example = f" ({s.text} -> {guard.format(*s.arg_texts)})" if guard and s.arg_texts else ""
    if s.untaken is not None:
        return ("guard the argument, not the result: make the branch ti.select does not take "
                f"safe to differentiate{example}, or select on the input of {s.op} instead of "
                "on its output (an `if` is also safe: its branch not taken is not "
                f"differentiated). {_WAY_OUT}")
    return (f"guard the argument of {s.op}, not its result: keep it where {s.op} and its "
            f"derivative are finite{example}, or handle that point in an `if`. {_WAY_OUT}")


def nonfinite_gradient(*, kernel: str, variant: str, finding, launch: int | None,
                       writer: Access | None) -> NonFiniteGradientError:
    """A derivative kernel wrote NaN or infinity into a gradient (a tangent): `finding` says
    where its value first went non-finite (tinyad/check/nonfinite.py NonFinite)."""
    mode = "adjoint" if variant == "adjoint" else "tangent (forward mode)"
    name = element_name(finding.field.name, finding.element)
    derived = f"{kernel}.grad" if variant == "adjoint" else f"{kernel} (tangent)"
    write = None if finding.loc is None else Access(
        kind=f"`{finding.stmt}`", loc=finding.loc, kernel=derived, launch=launch,
        iteration=finding.iteration, value=finding.value)
    earlier, origin = [], finding.origin
    cause_loc = origin and (origin.singular and origin.singular.loc or origin.loc)
    if cause_loc:
        earlier.append(Access(kind="cause", loc=cause_loc, kernel=derived, launch=launch,
                              iteration=finding.iteration, value=origin.value))
    fix = ("find where that value became non-finite and guard it there. " + _WAY_OUT)
    if origin is not None and origin.singular is not None:
        short, how = _singular_words(origin.singular, finding.value)
        consequence = (f"{short}; {how}: {name} = {format_value(finding.value)}, and every "
                       "gradient it flows into is wrong too")
        fix = _nonfinite_fix(origin.singular)
    elif origin is not None:
        operands = ", ".join(f"{t} = {format_value(v)}" for t, v in origin.operands)
        cause = ("division by zero" if origin.text.count("/") and any(
            v == 0 for _, v in origin.operands[1:]) else "overflow or an undefined operation")
        short = f"`{origin.text}` = {format_value(origin.value)} ({cause}, with {operands})"
        consequence = (f"{short}, in the {mode} statement `{origin.stmt}`; {name} = "
                       f"{format_value(finding.value)}")
    elif finding.loaded is not None and finding.loaded[0].role == "primal":
        source = element_name(finding.loaded[0].name, finding.loaded[1])
        short = f"the primal value {source} is already {format_value(finding.loaded[2])}"
        by = "" if writer is None else (f" (last written by {writer.kernel or 'Python scope'}"
                                        + (f", line {writer.loc.line})" if writer.loc else ")"))
        consequence = (f"{short}{by}: the gradient taken at a NaN or infinite point is not "
                       "finite either; the forward pass went wrong first")
        fix = f"find why {source} is not finite in the forward pass. {_WAY_OUT}"
    elif finding.loaded is not None:
        source = element_name(finding.loaded[0].name, finding.loaded[1])
        short = f"the gradient {source} flowing in is already {format_value(finding.loaded[2])}"
        consequence = f"{short}: it was not finite before this {mode} launch ran"
    else:
        short = "a non-finite value the re-run could not trace to an operation"
        consequence = "; ".join(finding.notes) or short
    if finding.notes and origin is not None:
        consequence += " (" + "; ".join(finding.notes) + ")"
    return NonFiniteGradientError(Report(
        rule="Non-finite gradient" if variant == "adjoint" else "Non-finite tangent",
        summary=f"{name} became {format_value(finding.value)} in the {mode} of {kernel}: "
                f"{short}.",
        kernel=kernel, field=finding.field.name, element=finding.element, write=write,
        earlier=earlier, consequence=consequence, fix=fix))


__all__ = ["Access", "Report", "RuleViolation", "ReadThenOverwriteRuleError",
           "SecondWriteRuleError", "ReadDuringAccumulationRuleError", "StaleGradientRuleError",
           "ParallelConflictRuleError", "ReplayDivergenceRuleError", "SilentZeroRuleError",
           "KernelSimplicityRuleError", "element_name", "read_then_overwrite",
           "python_overwrite", "second_write", "read_during_accumulation", "parallel_conflict",
           "replay_divergence", "custom_gradient_reads_changed", "random_in_adjoint",
           "custom_gradient_assigns",
           "value_passed_around_tape", "missing_gradient_on_path", "missing_dual_on_path",
           "no_output_gradient", "unseeded_outputs", "adjoints_out_of_order",
           "gradient_accumulates_across_rounds", "gradient_at_two_points",
           "computed_before_tape", "NonFiniteGradientError", "nonfinite_gradient"]
