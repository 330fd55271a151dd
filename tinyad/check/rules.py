"""The autodiff rules tinyad checks: one error class per kind of violation, and one constructor
per rule that writes its report (title, explanation, fix). The checks that find violations
(tinyad/check/launches.py and the launch checks, the judge of one launch's accesses,
tinyad/check/trail.py, and of values changed between launches, tinyad/check/changes.py) call
these constructors with what they saw.

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

from tinyad.check.nonfinite_words import nonfinite_story
from tinyad.check.report import ACCUMULATE, Access, Report, element_name, format_value
from tinyad.check.sweep_words import adjoint_skipped
from tinyad.core.errors import AutodiffRuleError, KernelSimplicityRuleError
from tinyad.core.srcloc import SrcLoc, user_loc


class RuleViolation(AutodiffRuleError):
    """An AutodiffRuleError carrying a Report; its message is the plain-text report."""

    def __init__(self, report: Report):
        self.report = report
        # Further elements of the field this one bug changed, for warn mode to count (a
        # backend that finds them all at once sets them; interp reports each element).
        self.more_elements: list = []
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


class CustomGradientRuleError(RuleViolation):
    """A custom gradient (grad_for) that is not the derivative of its grad_replaced primal."""


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
    """Two iterations of one parallel loop touched an element in conflicting ways. The values
    they saw depend on the order the iterations ran in (a backend's own, not the device's), so
    the report names none."""
    name = element_name(field, element)
    earlier, later = (dataclasses.replace(a, value=None) for a in (earlier, later))
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


def parallel_conflict_off_the_gradient(report: Report) -> Report:
    """A warning, not an error: a parallel conflict whose values no gradient depends on (yet):
    an integer counter or statistic (tinyad/check/races.py decides)."""
    return dataclasses.replace(
        report, rule="Parallel loop conflict (warning)",
        consequence=f"none so far: what the iterations leave in {report.field} depends on "
                    "their schedule (in Taichi too), but no gradient taken so far depends on "
                    "it; if one comes to (through a field with a gradient, or a value an "
                    "adjoint replays), this becomes an error",
        fix="use an atomic, whose result does not depend on the order: "
            "ti.atomic_max(c[None], v) instead of c[None] = ti.max(c[None], v), c[None] += 1 "
            "for a count; or run the loop in order with ti.loop_config(serialize=True)")


def parallel_conflict_reaches_gradient(report: Report, *, kernel: str, field: str,
                                       loc: SrcLoc, how: str) -> ParallelConflictRuleError:
    """A parallel conflict shown as a warning, whose values a later kernel carries into a
    gradient: the conflict's report, with where its values went."""
    use = ("stores them into " + field + ", which has a gradient" if how == "stored" else
           "reads them from " + field + " in a read its adjoint replays")
    return ParallelConflictRuleError(dataclasses.replace(
        report, consequence=f"{kernel} {use} (line {loc.line}): the gradient depends on the "
                            "schedule of the loop that raced"))


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


def custom_gradient_mismatch(*, primal: str, gradient: str, call: Access, definitions: list,
                             inputs: list[str], outputs: list[str], by_fd: float,
                             by_adjoint: float, wrong_inputs: list[str],
                             precision: str) -> CustomGradientRuleError:
    """The dot-product test of a grad_replaced / grad_for pair failed (tinyad/customcheck.py):
    w . (J v) from finite differences of the primal differs from v . (J^T w) from the custom
    gradient, for random v on the primal's inputs and w on its outputs."""
    where = (f" (it is {', '.join(wrong_inputs)} that {gradient} gets wrong)"
             if wrong_inputs and len(wrong_inputs) < len(inputs) else "")
    note = "" if precision == "f64" else " (the program runs in f32: a looser tolerance, 1e-3)"
    return CustomGradientRuleError(Report(
        rule="Custom gradient mismatch",
        summary=f"the custom gradient {gradient} is not the derivative of {primal}: along a "
                f"random direction, finite differences of {primal} give {by_fd:.9g} and "
                f"{gradient} gives {by_adjoint:.9g}{note}.",
        earlier=[call, *definitions],
        consequence=f"every gradient that flows back through {primal} is wrong{where}. The "
                    f"test: v random in [-1, 1] on {primal}'s inputs ({'; '.join(inputs)}), w "
                    f"random in [-1, 1] on its outputs ({'; '.join(outputs)}); w . (J v) by "
                    f"central differences of {primal} in f64 = {by_fd:.9g}, v . (J^T w) by "
                    f"{gradient} with w as the outputs' .grad = {by_adjoint:.9g}",
        fix=f"make {gradient} add (+=) to each input's .grad the derivative of everything "
            f"{primal} computes from it, times the outputs' .grad (a missing factor or term, or "
            "a .grad() left out of a recompute-then-chain sequence, gives this; "
            f"ti.ad.verify(lambda: {primal}(...), loss, [inputs]) checks one piece at a time). "
            f"If the difference is intended, turn this check off for the pair with "
            f"@ti.ad.grad_for({primal}, check=False), or every check with "
            "ti.init(check='off')"))


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
        fix=f"declare {field} with needs_grad=True (or call ti.root.lazy_grad()), or, where "
            f"the gradient is meant to stop there, call ti.stop_grad({field}) in the kernel "
            f"before the read (Taichi's spelling; tinyad also takes ti.stop_grad({field}[...]) "
            "on one read, which Taichi 1.7 refuses)"))


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


# ---- gradients lost around a Tape (tinyad/check/lostgrads.py, tinyad/tapeops.py) -------------

def gradient_read_inside_tape(*, gradient: str, read_loc: SrcLoc | None,
                              tape_loc: SrcLoc | None, kernel: str | None = None) -> Report:
    """A warning: a gradient read in Python scope (or by `kernel`) while the Tape records. It
    may be meant (a look at the zeros), but a step that uses it uses a stale gradient."""
    reader = f"the kernel {kernel} reads {gradient}" if kernel else f"{gradient} is read"
    return Report(
        rule="Gradient read inside the Tape (warning)",
        summary=f"{reader} inside the Tape, before its backward pass ran.",
        kernel=kernel, field=gradient, earlier=_tape_line(tape_loc),
        read=Access(kind="read", loc=read_loc, kernel=kernel), write_replaces_read=False,
        consequence=f"{gradient} holds zeros here (the Tape cleared it on entry) or an earlier "
                    "iterate's gradient: the backward pass fills it when the `with` block ends, "
                    "so an optimiser step taken here uses the wrong gradient",
        fix=f"{f'launch {kernel}' if kernel else f'read {gradient}'} after the `with "
            f"ti.ad.Tape(...)` block, where {gradient} holds this iterate's gradient")


def no_grad_kernel_on_path(*, kernel: str, field: str, source: str, write_loc: SrcLoc,
                           taped_kernel: str, read_loc: SrcLoc) -> Report:
    """A warning, not an error: ti.ad.no_grad says the gradient stops there, which may be meant."""
    return Report(
        rule="No-grad kernel on the loss path (warning)",
        summary=f"the no-grad kernel {kernel} computes {field} from {source}, and the taped "
                f"kernel {taped_kernel} reads {field}.",
        kernel=taped_kernel, field=field,
        write=Access(kind="store", loc=write_loc, kernel=kernel),
        read=Access(kind="read", loc=read_loc, kernel=taped_kernel), write_replaces_read=False,
        consequence=f"the Tape skips {kernel}'s adjoint: the gradient reaches {field}.grad and "
                    f"stops, so {source}.grad gets nothing through {field}",
        fix=f"drop @ti.ad.no_grad from {kernel} if {field} should pass the gradient on, or "
            f"read ti.stop_grad({source}[...]) in it to say that the gradient stops there")


def loss_written_after_tape(*, loss: str, kernel: str, write_loc: SrcLoc,
                            tape_loc: SrcLoc | None) -> SilentZeroRuleError:
    """Nothing inside the Tape wrote its loss; a kernel after it does."""
    return SilentZeroRuleError(Report(
        rule="Loss computed after the Tape",
        summary=f"{kernel} computes {loss}, the Tape's loss, after the Tape closed; nothing "
                "inside the Tape wrote it.",
        kernel=kernel, field=loss, earlier=_tape_line(tape_loc),
        write=Access(kind="store", loc=write_loc, kernel=kernel),
        consequence=f"the Tape differentiated a {loss} that its kernels never computed: every "
                    "gradient it produced is zero",
        fix=f"launch {kernel} inside the `with ti.ad.Tape({loss}):` block, after the kernels "
            "it reads from"))


def gradient_cleared_before_read(*, gradient: str, clear_loc: SrcLoc | None,
                                 read_loc: SrcLoc | None, tape_loc: SrcLoc | None,
                                 reader: str | None = None) -> Report:
    """A warning: reading zeros may be meant (a test that clearing works). `reader`: the kernel
    that read it (None: Python scope)."""
    return Report(
        rule="Gradient cleared before it was read (warning)",
        summary=f"{gradient} was cleared after the Tape's backward pass and before anything "
                "read the gradient it computed.",
        kernel=reader, field=gradient,
        earlier=[*_tape_line(tape_loc, "backward"), Access(kind="clear", loc=clear_loc)],
        read=Access(kind="read", loc=read_loc, kernel=reader),
        consequence=f"the read gets zeros instead of the Tape's gradient in {gradient}",
        fix=f"read {gradient} (take the optimiser step) before clearing it; a new Tape clears "
            "the gradients itself (clear_gradients=True)")


def gradient_discarded_by_load(*, field: str, write_loc: SrcLoc | None, kernel: str | None,
                               read_loc: SrcLoc | None) -> Report:
    """A warning: from_numpy inside a Tape sets constants, as Taichi's kernel for it does."""
    return Report(
        rule="Gradient stopped by from_numpy (warning)",
        summary=f"{field}.from_numpy(...) inside the Tape sets {field} to constants, and the "
                f"backward pass throws away the gradient {field} received"
                + (f" from {kernel}." if kernel else "."),
        kernel=kernel, field=field,
        write=Access(kind="from_numpy", loc=write_loc),
        read=Access(kind="read", loc=read_loc, kernel=kernel) if read_loc else None,
        write_replaces_read=False,
        consequence=f"whatever the values came from gets no gradient ({field}.grad ends zero, "
                    "as in Taichi): a copy through numpy (to_numpy, then from_numpy) cuts the "
                    "gradient",
        fix=f"copy between fields with {field}.copy_from(...) or in a kernel, which the Tape "
            f"differentiates; if {field} is a parameter, load it before the Tape")


def _tape_line(loc: SrcLoc | None, kind: str = "Tape") -> list:
    return [Access(kind=kind, loc=loc)] if loc is not None else []
# ---- NaN and infinity in a gradient ------------------------------------------------------------

def nonfinite_gradient(*, kernel: str, variant: str, finding, launch: int | None,
                       writer: Access | None) -> NonFiniteGradientError:
    """A derivative kernel wrote NaN or infinity into a gradient (a tangent): `finding` says
    where its value first went non-finite (tinyad/check/nonfinite.py NonFinite); the cause and
    the fix in words are tinyad/check/nonfinite_words.py's."""
    return NonFiniteGradientError(Report(
        rule="Non-finite gradient" if variant == "adjoint" else "Non-finite tangent",
        **nonfinite_story(kernel, variant, finding, launch, writer)))


__all__ = ["Access", "Report", "RuleViolation", "ReadThenOverwriteRuleError",
           "SecondWriteRuleError", "ReadDuringAccumulationRuleError", "StaleGradientRuleError",
           "ParallelConflictRuleError", "ReplayDivergenceRuleError", "SilentZeroRuleError",
           "KernelSimplicityRuleError", "element_name", "read_then_overwrite",
           "python_overwrite", "second_write", "read_during_accumulation", "parallel_conflict",
           "parallel_conflict_off_the_gradient", "parallel_conflict_reaches_gradient",
           "replay_divergence", "custom_gradient_reads_changed", "random_in_adjoint",
           "custom_gradient_assigns", "CustomGradientRuleError", "custom_gradient_mismatch",
           "value_passed_around_tape", "missing_gradient_on_path", "missing_dual_on_path",
           "no_output_gradient", "unseeded_outputs", "adjoints_out_of_order",
           "gradient_accumulates_across_rounds", "gradient_at_two_points",
           "computed_before_tape", "gradient_read_inside_tape", "no_grad_kernel_on_path",
           "loss_written_after_tape", "gradient_cleared_before_read", "adjoint_skipped",
           "gradient_discarded_by_load",
           "NonFiniteGradientError", "nonfinite_gradient"]
