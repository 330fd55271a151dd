"""The result of `ti.ad.verify`: every gradient element, its autodiff value and its truth.

Why a report object and not just a boolean: a wrong gradient is found to be fixed, and the fix
starts from *which* elements are wrong and by how much. The report renders with `rich` (a
table of the worst elements, and the formula when it is small); as plain text when the output
is not a terminal, which is also what an exception message gets. `to_dict()` is for tools.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass, field

import numpy as np

import tinyad.check.render  # noqa: F401  (imports rich first, keeping Python's random state)

# Default relative tolerances by truth and by the program's precision: sympy is exact, so only
# autodiff's rounding counts; finite differences carry their own error (~1e-9 at best).
RTOL = {("sympy", "f64"): 1e-8, ("sympy", "f32"): 1e-4, ("fd", "f64"): 1e-5, ("fd", "f32"): 1e-3}


@dataclass
class Entry:
    """One gradient element: d(loss)/d(param[index])."""
    param: str
    index: tuple
    autodiff: float
    truth: float                 # what autodiff is compared with: sympy's value, else FD's
    sympy: float | None = None
    fd: float | None = None
    error: float = 0.0           # |autodiff - truth|
    tolerance: float = 0.0
    ok: bool = True

    @property
    def name(self) -> str:
        if not self.index:
            return self.param
        return f"{self.param}[{', '.join(str(i) for i in self.index)}]"

    @property
    def badness(self) -> float:
        """How far past its tolerance the element is (for ordering the worst first)."""
        if math.isnan(self.error):
            return math.inf
        return self.error / self.tolerance if self.tolerance > 0 else self.error * 1e300


@dataclass
class GradientReport:
    loss: str
    params: list[str]
    method: str                  # what was asked: "sympy", "fd" or "both"
    truths: list[str]            # what was actually computed: "sympy" and/or "fd"
    entries: list[Entry]
    loss_value: float = math.nan
    formula: object = None       # the loss as a sympy expression (small cases only)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(e.ok for e in self.entries)

    @property
    def mismatches(self) -> list[Entry]:
        return [e for e in self.entries if not e.ok]

    def worst(self, count: int = 10) -> list[Entry]:
        return sorted(self.entries, key=lambda e: e.badness, reverse=True)[:count]

    def __bool__(self) -> bool:
        return self.ok

    # ---- output --------------------------------------------------------------------------
    def to_dict(self) -> dict:
        def num(v):
            return None if v is None else float(v)
        return {
            "ok": self.ok, "loss": self.loss, "params": list(self.params),
            "method": self.method, "truths": list(self.truths),
            "loss_value": num(self.loss_value),
            "formula": None if self.formula is None else str(self.formula),
            "notes": list(self.notes),
            "entries": [{"param": e.param, "index": list(e.index), "name": e.name,
                         "autodiff": num(e.autodiff), "truth": num(e.truth),
                         "sympy": num(e.sympy), "fd": num(e.fd), "error": num(e.error),
                         "tolerance": num(e.tolerance), "ok": e.ok} for e in self.entries],
        }

    def headline(self) -> str:
        wrt = ", ".join(self.params)
        truth = "sympy" if "sympy" in self.truths else "finite differences"
        if len(self.truths) > 1:
            truth += " (finite differences alongside)"
        bad = len(self.mismatches)
        verdict = (f"all {len(self.entries)} elements agree" if not bad else
                   f"{bad} of {len(self.entries)} elements disagree")
        return f"gradient of {self.loss} w.r.t. {wrt}: {verdict} with {truth}"

    def renderables(self, max_rows: int = 10):
        """The rich objects that make up the report (a headline, the formula, a table)."""
        from rich import box  # noqa: PLC0415  (rich is only needed to show a report)
        from rich.table import Table  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        parts = [Text(self.headline(), style="bold green" if self.ok else "bold red")]
        if self.formula is not None:
            parts.append(Text(f"{self.loss} = {self.formula}"))
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        table.add_column("element")
        table.add_column("autodiff", justify="right")
        for truth in self.truths:
            table.add_column(truth, justify="right")
        table.add_column("error", justify="right")
        table.add_column("", justify="left")
        rows = self.worst(max_rows) if not self.ok else self.entries[:max_rows]
        for e in rows:
            truths = [_fmt(e.sympy if t == "sympy" else e.fd) for t in self.truths]
            table.add_row(e.name, _fmt(e.autodiff), *truths, f"{e.error:.3g}",
                          Text("ok", style="green") if e.ok else Text("WRONG", style="bold red"))
        parts.append(table)
        if len(self.entries) > len(rows):
            shown = "worst" if not self.ok else "first"
            parts.append(Text(f"({shown} {len(rows)} of {len(self.entries)} elements shown)"))
        for note in self.notes:
            parts.append(Text(f"note: {note}", style="yellow"))
        return parts

    def render(self, max_rows: int = 10, width: int = 100) -> str:
        """The report as plain text (no colours, no terminal codes)."""
        from rich.console import Console  # noqa: PLC0415
        out = io.StringIO()
        console = Console(file=out, width=width, force_terminal=False, color_system=None,
                          highlight=False)
        for part in self.renderables(max_rows):
            console.print(part)
        return "\n".join(line.rstrip() for line in out.getvalue().rstrip().splitlines())

    def print(self, max_rows: int = 10) -> None:
        """Print the report to the terminal (in colour when it is one)."""
        from rich.console import Console  # noqa: PLC0415
        console = Console(highlight=False)
        for part in self.renderables(max_rows):
            console.print(part)

    def __rich__(self):
        from rich.console import Group  # noqa: PLC0415
        return Group(*self.renderables())

    def __str__(self) -> str:
        return self.render()


# ---- judging autodiff against the truths ------------------------------------------------------

def tolerance(rtol, atol, truth, precision, values):
    """tol(x) = atol + rtol*|x|, with atol relative to the largest gradient magnitude."""
    rtol = RTOL[(truth, precision)] if rtol is None else rtol
    if atol is None:
        finite = [abs(v) for arr in values.values() for v in np.ravel(arr) if np.isfinite(v)]
        atol = rtol * max(max(finite, default=0.0), 1e-12)
    return lambda x: atol + rtol * abs(x) if np.isfinite(x) else atol


def judge(report, params, autodiff, truths, rtol, atol, precision):
    """One Entry per element. sympy's value is the truth when there is one (it is exact);
    finite differences then only add a note where they disagree (a kink or a jump within a
    step of the point, most likely), else they are the truth."""
    tolerances = {}
    for name, values in truths.items():
        by_param = {p: np.array([values[(p, i)] for i in np.ndindex(p.data.shape)])
                    for p in params}
        tolerances[name] = tolerance(rtol, atol, name, precision, by_param)
    primary = "sympy" if "sympy" in truths else "fd"
    fd_disagrees = []
    for p in params:
        for index in np.ndindex(p.data.shape):
            ad = float(autodiff[p][index])
            entry = Entry(p.name, index, ad, truths[primary][(p, index)],
                          sympy=truths.get("sympy", {}).get((p, index)),
                          fd=truths.get("fd", {}).get((p, index)))
            entry.error, entry.tolerance, entry.ok = _judge(ad, entry.truth,
                                                            tolerances[primary])
            if primary == "sympy" and entry.fd is not None and \
                    not _judge(entry.sympy, entry.fd, tolerances["fd"])[2]:
                fd_disagrees.append(entry.name)
            report.entries.append(entry)
    if fd_disagrees:
        report.notes.append(f"finite differences disagree with sympy at {', '.join(fd_disagrees)}"
                            ": a kink or a jump within a step of the point?")


def _judge(value, truth, tol_of) -> tuple[float, float, bool]:
    """(error, tolerance, ok) of one value (autodiff's, say) against one truth."""
    if truth == value or (math.isnan(truth) and math.isnan(value)):
        return 0.0, tol_of(truth), True
    error, tol = abs(value - truth), tol_of(truth)
    return error, tol, bool(error <= tol)


def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.10g}"
