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
from dataclasses import dataclass

from tinyad.core import analysis, ir
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


# ---- what the adjoint replays -------------------------------------------------------------
def replay_notes(kernel) -> str:
    """Which forward reads the adjoint replays, and which writes in this kernel would change
    their element before the adjoint runs."""
    try:
        loads = analysis.replayed_loads(kernel.grad.ir)
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
                out.append(f"    line {write.loc.line} writes {_access(write.field, write.indices)}"
                           f" ({kind}): where that changes an element read here, the adjoint "
                           "replays the new value")
    out.append("Any later kernel of the Tape that writes one of these elements breaks it too.")
    return "\n".join(out)


def _access(field, indices) -> str:
    return f"{field.name}[{', '.join(format_expr(i) for i in indices)}]"


def explain(kernel, width: int | None = None) -> str:
    """Source, IR and adjoint IR side by side, then the reads the adjoint replays."""
    return side_by_side(*kernel_panels(kernel), width=width) + "\n\n" + replay_notes(kernel)
