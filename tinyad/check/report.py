"""A rule-violation report: what happened to which element, where, and what to do; and its plain
text. The rich panel (tinyad/check/render.py) lays out the same lines.

    Global Data Access Rule 1: b[] was read, then changed before the adjoint used it.
      kernel func_broke_rule_1
      read  at prog.py:12, in func_broke_rule_1 (launch #3): value 10.0
            loss[None] = x[1] * b[None]
                                ^^^^^^^
      write at prog.py:13, in func_broke_rule_1 (launch #3): atomic_add, 10.0 -> 110.0
            b[None] += 100
            ^^^^^^^^^^^^^^
      wrong gradient: ...
      fix: ...
"""
from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field  # `field` is also a Report attribute
from typing import Any

from tinyad.core.srcloc import SrcLoc

ACCUMULATE = ("atomic_add", "atomic_sub")      # the write kinds that add up
# Which accesses commute when two iterations of a parallel loop touch one element: the same
# slot (reads, or one kind of atomic) does; two different slots, or a store, do not.
SLOTS = {"read": 0, "store": 1, "atomic_add": 2, "atomic_sub": 2, "atomic_min": 3,
         "atomic_max": 4, "atomic_bit_and": 5, "atomic_bit_or": 6, "atomic_bit_xor": 7}


@dataclass(slots=True)
class Access:
    """One access a report names: a read, a store or an atomic (or a Python-scope write)."""
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


@dataclass(kw_only=True)
class Report:
    """Built by the rule constructors in tinyad/check/rules.py, which hold every rule's text."""
    rule: str                  # short name, e.g. "Global Data Access Rule 1"
    summary: str               # the rule in one sentence
    kernel: str | None = None
    field: str | None = None
    element: tuple | None = None
    read: Access | None = None
    write: Access | None = None
    earlier: list = dataclass_field(default_factory=list)   # other accesses that explain the story
    consequence: str = ""      # which gradient would have been wrong, and how
    fix: str = ""
    # The write changed the value that was read (show "old -> new"); False when the read and
    # the write are independent events, such as two iterations of a parallel loop.
    write_replaces_read: bool = True

    @property
    def element_text(self) -> str:
        return "" if self.field is None else element_name(self.field, self.element or ())

    @property
    def title(self) -> str:
        return f"{self.rule}: {self.summary}"

    def to_dict(self) -> dict:
        return {"rule": self.rule, "summary": self.summary, "kernel": self.kernel,
                "field": self.field,
                "element": [int(i) for i in self.element] if self.element is not None else None,
                "read": self.read.to_dict() if self.read else None,
                "write": self.write.to_dict() if self.write else None,
                "earlier": [a.to_dict() for a in self.earlier],
                "consequence": self.consequence, "fix": self.fix}

    def __str__(self) -> str:
        return render_text(self)


def element_name(field_name: str, index) -> str:
    """`x[2, 0]`, `loss[]`: an element as reports write it."""
    return f"{field_name}[{', '.join(str(int(i)) for i in index)}]"


def format_value(value) -> str:
    """A field value as reports write it: floats to 9 significant digits."""
    value = _plain(value)
    return f"{value:.9g}" if isinstance(value, float) else str(value)


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    return value


# ---- the lines of a report, for the plain and the rich renderer --------------------------------

@dataclass(frozen=True)
class Line:
    """One line under a report's title. `kind` says what it is, so that each renderer can style
    and lay it out: "kernel", "access", "code" (a source line or its carets), "consequence",
    "fix"."""
    kind: str
    label: str
    text: str


def _where(access: Access) -> str:
    if access.loc is None:
        return "in Python scope"
    place = f"{access.loc.file.rsplit('/', 1)[-1]}:{access.loc.line}"
    if access.kernel is None:
        return f"at {place}, in Python scope"
    text = f"at {place}, in {access.kernel}"
    if access.launch is not None:
        text += f" (launch #{access.launch}"
        text += f", iteration {access.iteration})" if access.iteration is not None else ")"
    return text


def _access_lines(label: str, access: Access, detail: str) -> list[Line]:
    lines = [Line("access", label, _where(access) + (": " + detail if detail else ""))]
    if access.loc is not None and access.loc.text:
        for snippet_line in access.loc.snippet().splitlines()[1:]:
            lines.append(Line("code", "", snippet_line.removeprefix("    ")))
    return lines


def _value_detail(access: Access) -> str:
    return "" if access.value is None else f"value {format_value(access.value)}"


def report_lines(report: Report) -> list[Line]:
    """Everything a report says under its title, in order."""
    lines = []
    if report.kernel:
        lines.append(Line("kernel", "kernel", report.kernel))
    for access in report.earlier:
        lines += _access_lines(access.kind, access, _value_detail(access))
    if report.read is not None:   # (a read known only by its line has no value to show)
        lines += _access_lines("read", report.read, _value_detail(report.read))
    if report.write is not None:
        detail = report.write.kind
        if report.write.value is not None:
            if report.read is not None and report.write_replaces_read:
                detail += (f", {format_value(report.read.value)} -> "
                           f"{format_value(report.write.value)}")
            else:
                detail += f", value {format_value(report.write.value)}"
        lines += _access_lines("write", report.write, detail)
    if report.consequence:
        lines.append(Line("consequence", "wrong gradient:", report.consequence))
    if report.fix:
        lines.append(Line("fix", "fix:", report.fix))
    return lines


def render_text(report: Report) -> str:
    """The report as plain text: the message of its exception, and what a pipe or file gets."""
    out = [report.title]
    for line in report_lines(report):
        if line.kind == "code":
            out.append(f"        {line.text}")
        elif line.kind == "access":
            out.append(f"  {line.label:5} {line.text}")
        else:
            out.append(f"  {line.label} {line.text}")
    return "\n".join(out)


def bug_of(r: Report) -> tuple:
    """What makes reports one bug: the rule, the kernel and the line that broke it (the
    write; the read where no write is named). A write that changes elements read at several
    lines, or by several kernels, is one bug: one fix."""
    wrote = r.write is not None and r.write.loc is not None
    access = r.write if wrote else r.read
    loc = access.loc if access is not None else None
    kernel = r.write.kernel if wrote else r.kernel     # (a Python write's: None, whoever read)
    bug = (r.rule, kernel) + ((loc.file, loc.line) if loc is not None else (None, None))
    if access is None and r.earlier:     # known by its lines alone (two custom-gradient pairs)
        bug += tuple(a.loc for a in r.earlier)
    return bug
