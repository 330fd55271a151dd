"""Looking inside a kernel: its source, IR and adjoint IR side by side, and which reads the
adjoint replays (so which later writes would make its gradient wrong).

`side_by_side` lays text panels out in columns when they fit the width, else one under the
other. It never wraps a line: a code line cut in two is no longer code, so a panel that is too
wide goes below the others instead. Used by `tinyad explain` and by the lessons.
"""
from __future__ import annotations

import inspect
import os
import re
import shutil
import sys
import textwrap
from dataclasses import dataclass

import numpy as np

from tinyad.analysis.queries import replayed_loads
from tinyad.check.hazards import unproven_fields
from tinyad.core import ir
from tinyad.core.errors import TinyadError
from tinyad.core.printer import format_expr

GAP = "   "
FIXED_WIDTH = 80     # the width when the output is not a terminal, so a pipe gets the same text
_LOC_COMMENT = re.compile(r"^(.*?\S)\s+# [^#\s]+:(\d+)$")


@dataclass
class Panel:
    title: str
    text: str

    @property
    def lines(self) -> list[str]:
        return self.text.rstrip("\n").splitlines() or [""]

    @property
    def width(self) -> int:
        return max(len(self.title), *(len(line) for line in self.lines))


def output_width(stream=None) -> int:
    """The terminal's width, or FIXED_WIDTH when the output is not a terminal."""
    stream = stream or sys.stdout
    if hasattr(stream, "isatty") and stream.isatty():
        return shutil.get_terminal_size((FIXED_WIDTH, 24)).columns
    return FIXED_WIDTH


def side_by_side(*panels: Panel, width: int | None = None) -> str:
    """Panels in columns if all fit in `width`, else stacked; no line is wrapped or padded at
    its end."""
    width = width or output_width()
    if len(panels) > 1 and sum(p.width for p in panels) + len(GAP) * (len(panels) - 1) <= width:
        return _columns(panels)
    # Stacked: groups of neighbours that fit still go side by side.
    out, group = [], []
    for panel in panels:
        trial = [*group, panel]
        if group and sum(p.width for p in trial) + len(GAP) * (len(trial) - 1) > width:
            out.append(_columns(group))
            group = [panel]
        else:
            group = trial
    out.append(_columns(group))
    return "\n\n".join(out)


def _columns(panels) -> str:
    widths = [p.width for p in panels]
    rows = [[p.title for p in panels], ["-" * w for w in widths]]
    height = max(len(p.lines) for p in panels)
    rows += [[p.lines[k] if k < len(p.lines) else "" for p in panels] for k in range(height)]
    return "\n".join(GAP.join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


# ---- panels of one kernel -----------------------------------------------------------------
def source_panel(kernel) -> Panel:
    """The kernel's source, each line numbered as in its file."""
    lines, first = inspect.getsourcelines(kernel.fn)
    text = "".join(f"{first + k:>3} {line}" for k, line in enumerate(lines))
    return Panel(f"source ({os.path.basename(inspect.getsourcefile(kernel.fn))})", text)


def compact_ir(text: str) -> str:
    """Printed IR with its `# file:line` comments shortened to `# line` (the file is the
    source panel's), so that IR fits beside the source."""
    return "\n".join(_LOC_COMMENT.sub(r"\1  # \2", line) for line in text.splitlines())


def ir_panel(kernel) -> Panel:
    return Panel("IR (kernel.ir)", compact_ir(str(kernel.ir)))


def adjoint_panel(kernel) -> Panel:
    try:
        return Panel("adjoint IR (kernel.grad.ir)", compact_ir(str(kernel.grad.ir)))
    except TinyadError as error:   # not differentiable: say why instead of an adjoint
        return Panel("adjoint IR (kernel.grad.ir)", f"none: {error}")


def kernel_panels(kernel) -> list[Panel]:
    return [source_panel(kernel), ir_panel(kernel), adjoint_panel(kernel)]


def show(kernel, *extra: Panel, width: int | None = None) -> None:
    """Print a kernel's source, IR and adjoint IR side by side, then any extra panels."""
    print(side_by_side(*kernel_panels(kernel), *extra, width=width))


# ---- panels for a lesson step: the tape, values, the formula, one element's log ----------
def tape_panel(tape) -> Panel:
    """What a Tape recorded, and the adjoints its exit runs (in reverse order)."""
    names = [_entry_name(adjoint) for adjoint, *_ in tape.entries]
    lines = [f"{k}. {name}()" for k, name in enumerate(names, 1)] or ["(nothing recorded)"]
    lines += ["backward:"] + [f"   {name}.grad()" for name in reversed(names)]
    return Panel("the tape", "\n".join(lines))


def _entry_name(adjoint) -> str:
    primal = getattr(adjoint, "primal", None)        # a kernel's .grad, or a grad_for function
    return getattr(getattr(primal, "fn", None), "__name__", None) or adjoint.__name__


def values_panel(*fields) -> Panel:
    """Each field's values, and its gradient where it has one."""
    lines = []
    for f in fields:
        lines.append(f"{f.name} = {_short(f.to_numpy())}")
        if f.has_grad:
            lines.append(f"{f.name}.grad = {_short(f.grad.to_numpy())}")
    return Panel("values and gradients", "\n".join(lines))


def _short(values) -> str:
    return np.array2string(np.asarray(values), precision=4, threshold=8, edgeitems=3,
                           max_line_width=60)


def formula_panel(run, loss) -> Panel:
    """The loss that `run()` computes, as sympy's formula (ti.ad.formula)."""
    from tinyad.ad import formula  # noqa: PLC0415  (ad.py imports the kernels' machinery)
    return Panel(f"{loss.name} as a formula (ti.ad.formula)", str(formula(run, loss)))


def element_panel(field, index) -> Panel:
    """What the rule checker's replay witness holds for one element inside a Tape: each launch
    whose adjoint replays a read of it, the line, and whether the value read is still in the
    field (no write has come near it: nothing is copied) or kept in a copy made just before a
    write that might change it (tinyad/check/replaycheck.py)."""
    from tinyad.runtime import runtime  # noqa: PLC0415
    index = index if isinstance(index, tuple) else (index,)
    title = f"replay witness of {field.name}[{', '.join(map(str, index))}]"
    checker = getattr(runtime.backend, "checker", None)
    if checker is None:
        return Panel(title, "kept with the checks on (ti.init's check, \"error\" by default)")
    lines = []
    for launch in checker.taped:
        filed = launch.waiting is None
        for read in (launch.snapshots if filed else launch.waiting[0].reads):
            if read.field is not field or not all(
                    lo <= i < hi for i, (lo, hi) in zip(index, read.box)):
                continue
            where = f"{launch.kernel} (launch #{launch.number}) replays its read at line " \
                f"{read.site.node.loc.line}: "
            if filed and read.values is not None:    # (a write came near it: copied first)
                copy = read.values[tuple(i - lo for i, (lo, _) in zip(index, read.box))]
                lines.append(where + "kept in a copy, value " + (
                    f"{float(copy):.6g}" if np.ndim(copy) == 0 else _short(copy)))
            else:                                    # (nothing has written near it)
                lines.append(where + "still in the field")
    return Panel(title, "\n".join(lines) or "no launch of this Tape replays it")


# ---- what the adjoint replays -------------------------------------------------------------
def replay_notes(kernel, width: int | None = None) -> str:
    """Which forward reads the adjoint replays, and which writes in this kernel would change
    their element before the adjoint runs."""
    try:
        loads = replayed_loads(kernel.grad.ir)
    except TinyadError as error:
        return f"no adjoint: {error}"
    if not loads:
        return ("the adjoint replays no field read: its gradient does not depend on field values "
                "the forward read")
    writes = [s for s in ir.walk_stmts(kernel.ir.body) if isinstance(s, (ir.Store, ir.AtomicOp))
              and s.field.role == "primal"]
    out = ["The adjoint replays these reads: each must still hold the value the forward read",
           "when the adjoint runs (a Tape runs it after every later kernel of the Tape)."]
    seen = set()
    for load in loads:
        text = f"{_access(load.field, load.indices)}  (line {load.loc.line})"
        if text in seen:
            continue
        seen.add(text)
        out.append(f"  reads {text}")
        for write in writes:
            if write.field is load.field:
                kind = "+=" if isinstance(write, ir.AtomicOp) else "="
                out.append(_wrapped(
                    f"    line {write.loc.line} writes {_access(write.field, write.indices)} "
                    f"({kind}): where that changes an element read here, the adjoint replays "
                    "the new value", width, "      "))
    out.append("Any later kernel of the Tape that writes one of these elements breaks it too.")
    return "\n".join(out)


def _access(field, indices) -> str:
    return f"{field.name}[{', '.join(format_expr(i) for i in indices)}]"


def recording_notes(kernel, width: int | None = None) -> str:
    """The kernel's checked variant (`kernel.checked.ir`), where its IR does not prove one launch
    free of in-launch hazards on some fields (a scatter, a read another iteration may
    overwrite): the checker runs it for a launch whose boxes do not settle them either, in
    either mode (tinyad/check/accessrecord.py); '' where the IR settles every field."""
    checked = kernel.checked.ir
    if checked is kernel.ir:
        return ""
    try:
        replayed = frozenset(id(load) for load in replayed_loads(kernel.grad.ir))
    except TinyadError:
        replayed = frozenset()
    names = ", ".join(f.name for f in unproven_fields(kernel.ir, replayed))
    return _wrapped(f"The IR alone does not settle one launch's accesses to {names}. Where "
                    "neither the launch's index boxes nor its values before and after settle "
                    "them, the checker runs this variant instead (kernel.checked.ir): it "
                    "records each access's element, and the value a replayed read read, for "
                    "tinyad/check/trail.py to judge.", width) + "\n" + compact_ir(str(checked))


def _wrapped(text: str, width: int | None, indent: str = "") -> str:
    """A paragraph of prose broken between words to the output's width (IR lines are not)."""
    return textwrap.fill(text, width or output_width(), subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def explain(kernel, width: int | None = None) -> str:
    """Source, IR and adjoint IR side by side, the reads the adjoint replays, and the
    recording variant where the checker may need one."""
    text = side_by_side(*kernel_panels(kernel), width=width) + "\n\n" + \
        replay_notes(kernel, width)
    recorded = recording_notes(kernel, width)
    return text + "\n\n" + recorded if recorded else text
