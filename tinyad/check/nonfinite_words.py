"""The words of a non-finite gradient's report (tinyad/check/rules.py `nonfinite_gradient`):
which primal operation's value or derivative is not finite, how the derivative kernel turned it
into the gradient's value (0 * inf from the branch `ti.select` did not take, `sqrt'(0)`), and
the fix: guard the argument, not the result."""
from __future__ import annotations

import dataclasses
import math

from tinyad.check.report import Access, element_name, format_value

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
        how = (f"ti.select did not take {s.text} ({cond} is {value} here), so the adjoint "
               "flowing into it is 0, and 0 times an infinite or NaN derivative is NaN (both "
               "branches of a select are differentiated)")
        return f"0 * ({what}) in the branch ti.select did not take", how
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


def nonfinite_story(kernel: str, variant: str, finding, launch: int | None,
                    writer: Access | None) -> dict:
    """The Report fields (all but the rule) of a derivative kernel that wrote NaN or infinity
    into a gradient (a tangent): `finding` is tinyad/check/nonfinite.py's NonFinite."""
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
    short, consequence, fix = _cause(finding, name, mode, writer)
    if finding.notes and origin is not None:
        consequence += " (" + "; ".join(finding.notes) + ")"
    return {"summary": f"{name} became {format_value(finding.value)} in the {mode} of "
                       f"{kernel}: {short}.",
            "kernel": kernel, "field": finding.field.name, "element": finding.element,
            "write": write, "earlier": earlier, "consequence": consequence, "fix": fix}


def _cause(finding, name: str, mode: str, writer) -> tuple[str, str, str]:
    """(the cause in a few words, the whole story, the fix)."""
    origin = finding.origin
    fix = "find where that value became non-finite and guard it there. " + _WAY_OUT
    if origin is not None and origin.singular is not None:
        short, how = _singular_words(origin.singular, finding.value)
        story = (f"{short}; {how}: {name} = {format_value(finding.value)}, and every gradient "
                 "it flows into is wrong too")
        return short, story, _nonfinite_fix(origin.singular)
    if origin is not None:
        operands = ", ".join(f"{t} = {format_value(v)}" for t, v in origin.operands)
        cause = ("division by zero" if "/" in origin.text and any(
            v == 0 for _, v in origin.operands[1:]) else "overflow or an undefined operation")
        short = f"`{origin.text}` = {format_value(origin.value)} ({cause}, with {operands})"
        story = (f"{short}, in the {mode} statement `{origin.stmt}`; {name} = "
                 f"{format_value(finding.value)}")
        return short, story, fix
    if finding.loaded is not None and finding.loaded[0].role == "primal":
        source = element_name(finding.loaded[0].name, finding.loaded[1])
        short = f"the primal value {source} is already {format_value(finding.loaded[2])}"
        by = "" if writer is None else (f" (last written by {writer.kernel or 'Python scope'}"
                                        + (f", line {writer.loc.line})" if writer.loc else ")"))
        story = (f"{short}{by}: the gradient taken at a NaN or infinite point is not finite "
                 "either; the forward pass went wrong first")
        return short, story, f"find why {source} is not finite in the forward pass. {_WAY_OUT}"
    if finding.loaded is not None:
        source = element_name(finding.loaded[0].name, finding.loaded[1])
        short = f"the gradient {source} flowing in is already {format_value(finding.loaded[2])}"
        return short, f"{short}: it was not finite before this {mode} launch ran", fix
    short = "a non-finite value the re-run could not trace to an operation"
    return short, "; ".join(finding.notes) or short, fix


# ---- a non-finite gradient not used yet, and used ---------------------------------------------

def nonfinite_unused(report):
    """The warning a non-finite gradient gets when the backward pass leaves it: nothing has
    used it yet (tinyad/check/nonfinite.py NonFiniteChecks says when it is used)."""
    return dataclasses.replace(
        report, rule=f"{report.rule} (warning)",
        consequence=f"{report.consequence}. Not an error yet: nothing has used {report.field} "
                    "or a gradient it flowed into; reading one (x.grad[i], x.grad.to_numpy(), "
                    "or a kernel loading it, such as an optimiser step) before it is cleared "
                    "raises this report. Gradients nobody reads may stay NaN (Taichi leaves "
                    "them so too)")


def nonfinite_used(report, *, gradient: str, element, value, loc, kernel: str | None):
    """The report again, now that the program uses a gradient it made non-finite: `kernel`
    (None: Python scope) read `gradient` (`element`, None: the whole field) at `loc`."""
    name = gradient if element is None else element_name(gradient, element)
    by = f"kernel {kernel}" if kernel else "Python scope"
    read = Access(kind="read", loc=loc, kernel=kernel, value=value)
    return dataclasses.replace(
        report, read=read, write_replaces_read=False,
        consequence=f"{report.consequence}; the program uses it: {by} reads {name} = "
                    f"{format_value(value)}")
