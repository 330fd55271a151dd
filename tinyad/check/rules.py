"""The autodiff rules tinyad checks, and the report a violation carries.

Why these rules are exactly the conditions for a right gradient (tinyad/reverse.py): an adjoint
kernel recomputes every value it needs from the fields as they are when it runs, and the adjoint
of a store hands the gradient on and zeroes it. So a gradient is right when
  (1) every load the adjoint replays reads what the forward read (no element the adjoint relies on
      is changed between its read and the adjoint),
  (2) no two iterations of a parallel loop depend on each other through an element,
  (3) every field on the derivative path has a gradient and the outputs are seeded.
Each violation class below is one way to break these; `Report` says which element, where, and
what to do about it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tinyad.core.errors import AutodiffRuleError, KernelSimplicityRuleError
from tinyad.core.srcloc import SrcLoc


@dataclass(slots=True)
class Access:
    """One event of the access log."""
    kind: str                 # "read", "store", "atomic_add", ..., "python write"
    loc: SrcLoc | None
    kernel: str | None = None  # None for Python scope
    launch: int | None = None
    iteration: int | None = None
    value: Any = None
    time: int = 0
    reported: bool = False     # a read already blamed in a report is not reported again

    def to_dict(self) -> dict:
        return {"kind": self.kind, "file": self.loc.file if self.loc else None,
                "line": self.loc.line if self.loc else None, "kernel": self.kernel,
                "launch": self.launch, "iteration": self.iteration,
                "value": _plain(self.value)}


@dataclass
class Report:
    rule: str                  # short name, e.g. "Global Data Access Rule 1"
    summary: str               # the rule in one sentence
    kernel: str | None
    field: str | None
    element: tuple | None
    read: Access | None = None
    write: Access | None = None
    earlier: list = field(default_factory=list)   # other accesses that explain the story
    consequence: str = ""      # which gradient would have been wrong, and how
    fix: str = ""

    @property
    def element_text(self) -> str:
        return "" if self.field is None else element_name(self.field, self.element or ())

    def to_dict(self) -> dict:
        return {"rule": self.rule, "summary": self.summary, "kernel": self.kernel,
                "field": self.field,
                "element": [int(i) for i in self.element] if self.element is not None else None,
                "read": self.read.to_dict() if self.read else None,
                "write": self.write.to_dict() if self.write else None,
                "earlier": [a.to_dict() for a in self.earlier],
                "consequence": self.consequence, "fix": self.fix}

    def __str__(self) -> str:
        from tinyad.check.render import render_text  # noqa: PLC0415  (rendering lives with the log)
        return render_text(self)


def element_name(field_name: str, index) -> str:
    """`x[2, 0]`, `loss[]`: an element as reports write it."""
    return f"{field_name}[{', '.join(str(int(i)) for i in index)}]"


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    return value


class RuleViolation(AutodiffRuleError):
    """An AutodiffRuleError carrying a Report; its message is the rendered report."""

    def __init__(self, report: Report):
        self.report = report
        loc = (report.write or report.read).loc if (report.write or report.read) else None
        super().__init__(str(report))
        self.loc = loc

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


class SilentZeroRuleError(RuleViolation):
    """A gradient would silently be zero or doubled: unseeded outputs, a field without
    gradient on the path, adjoints run out of order, a value passed around the tape."""


__all__ = ["Access", "Report", "RuleViolation", "ReadThenOverwriteRuleError",
           "SecondWriteRuleError", "ReadDuringAccumulationRuleError",
           "ParallelConflictRuleError", "ReplayDivergenceRuleError", "SilentZeroRuleError",
           "KernelSimplicityRuleError"]
