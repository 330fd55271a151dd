"""The report of a hand-written gradient kernel whose result is not tinyad's adjoint of the launch
it undoes (tinyad/check/handgrads.py finds it); part of the rule catalogue, tinyad/check/rules.py
(kept here to hold that file under the line limit, as sweep_words.py is)."""
from __future__ import annotations

from tinyad.check.report import Access, Report, element_name, format_value
from tinyad.check.rules import CustomGradientRuleError
from tinyad.core.srcloc import SrcLoc


def hand_gradient_mismatch(*, kernel: str, launch: int, forward: str, forward_launch: int,
                           forward_loc: SrcLoc, field: str, element: tuple, write_loc: SrcLoc,
                           value: float, expected: float, before: float, assigns: bool,
                           count: int, f32: bool,
                           call_loc: SrcLoc | None) -> CustomGradientRuleError:
    """`kernel`, written by hand to undo launch #forward_launch of `forward`, left `value` in
    `field`[element] where tinyad's adjoint of that launch leaves `expected` (from `before`)."""
    name = element_name(field, element)
    added = expected - before
    also = f" (or {format_value(added)}, if it assigns)" if assigns else ""
    more = f" ({count} elements disagree; the first is shown)" if count > 1 else ""
    tolerance = "1e-4 (the program runs in f32)" if f32 else "1e-7"
    return CustomGradientRuleError(Report(
        rule="Hand-written gradient mismatch", kernel=kernel, field=field, element=element,
        summary=f"{kernel}, a gradient kernel written by hand, is not the derivative of "
                f"{forward}: it left {format_value(value)} in {name}, where tinyad's adjoint of "
                f"the same launch of {forward} leaves {format_value(expected)}{also}{more}.",
        write=Access(kind="atomic_add" if not assigns else "store", loc=write_loc,
                     kernel=kernel, launch=launch, value=value),
        earlier=[Access(kind="call", loc=call_loc),
                 Access(kind="forward", loc=forward_loc, kernel=forward, launch=forward_launch)],
        write_replaces_read=False,
        consequence=f"{kernel} reads the gradient of what forward launch #{forward_launch} of "
                    f"{forward} wrote and passes it on to {field} (it held "
                    f"{format_value(before)} before): every gradient that flows back through "
                    f"{forward} is wrong from here. tinyad ran {forward}'s own adjoint on "
                    f"copies, from the same upstream gradients and values, and the two differ "
                    f"beyond rounding (relative {tolerance})",
        fix=f"make {kernel} add to {field} the derivative of everything {forward} computes "
            f"from it, times the upstream .grad (a missing factor or term gives this), or call "
            f"{forward}.grad() instead. If the difference is intended (a surrogate gradient), "
            f"mark the kernel with ti.ad.trust({kernel}), or turn every check off with "
            "ti.init(check='off')"))
