"""Which rows (leading indices) of each field one launch may read and write, from the kernel's IR
and the launch's integer arguments: what the check "computed before the Tape" compares
(tinyad/check/launches.py). A time-stepped kernel at step t reads row t and writes row t + 1;
without its rows, a Tape that recomputes every step would look as if it read the rows a forward
pass before the Tape had computed. Both backends ask here (fast mode through its LaunchPlan)."""
from __future__ import annotations

from tinyad.analysis.sites import access_sites, fixed_int_args
from tinyad.check.boxes import box_function
from tinyad.check.spans import span_union
from tinyad.core import ir
from tinyad.core.printer import format_expr


class KernelRows:
    """One kernel's primal loads and writes, and their rows per launch. A launch alike the
    kernel's previous one (no arguments, or the same) shares its rows: read them, never change
    them. Only the latest are kept: a time-stepped kernel, whose every step differs, would
    keep a kilobyte a step (fast mode keeps them in its per-arguments LaunchPlan instead)."""

    def __init__(self, kernel: ir.Kernel):
        sites = self.sites = access_sites(kernel)
        self.args = fixed_int_args(kernel)
        names = [a.name for a in kernel.args]
        self.positions = tuple(names.index(n) for n in self.args)
        own = loads_of_own_stores(sites)
        primal = [s for s in sites if s.field.role == "primal"]
        # a load of an element its iteration has just stored reads this launch's value: not a
        # read of what came before the launch
        self.loads = [s for s in primal if isinstance(s.node, ir.Load) and id(s) not in own]
        self.writes = [s for s in primal if not isinstance(s.node, ir.Load)]
        self._functions = [box_function(s, s.field.shape, self.args)
                           for s in (*self.loads, *self.writes)]
        self._latest = (None, None)     # (argument values, their rows) of the latest launch

    def of(self, scalars: tuple) -> tuple:
        """({field: spans read}, {field: spans written}) of a launch with these arguments."""
        return self.of_values(tuple(int(scalars[i]) for i in self.positions))

    def of_values(self, values: tuple) -> tuple:
        """The same, given the values of the integer arguments `self.args`."""
        latest, rows = self._latest
        if values != latest:
            rows = self._rows(values)
            self._latest = (values, rows)
        return rows

    def _rows(self, values: tuple) -> tuple:
        boxes = [f(*values) for f in self._functions]
        n = len(self.loads)
        return LaunchRows(
            (spans_of((s.field, b) for s, b in zip(self.loads, boxes[:n]) if b is not None),
             spans_of((s.field, b) for s, b in zip(self.writes, boxes[n:]) if b is not None)))

    def of_boxes(self, box_of) -> tuple:
        """The same, given `box_of(site)` for the sites in `self.sites` (fast mode's plan
        has worked them out already)."""
        return LaunchRows(
            (spans_of((s.field, b) for s in self.loads if (b := box_of(s)) is not None),
             spans_of((s.field, b) for s in self.writes if (b := box_of(s)) is not None)))


class LaunchRows(tuple):
    """({field: spans read}, {field: spans written}) of one launch, and what a check made of
    them once (`steps`: tinyad/check/beforetape.py's), kept with them: a time-stepped
    kernel's launches share a few such rows, one per argument value (fast mode's plans)."""
    steps = None


def rows_of(compiled) -> KernelRows:
    """The KernelRows of `compiled` (a traced kernel), made once."""
    return compiled.memos[_rows]


def _rows(compiled) -> KernelRows:
    return KernelRows(compiled.ir)


def spans_of(boxes) -> dict:
    """{field: spans of leading indices} of (field, box) pairs."""
    rows: dict = {}
    for fld, box in boxes:
        rows.setdefault(fld, {})[box[0] if box else (0, 1)] = None    # (each span once)
    out = {}
    for fld, spans in rows.items():
        first, *rest = spans
        out[fld] = span_union((first,), rest) if rest else (first,)
    return out


def loads_of_own_stores(sites) -> set:
    """id() of the load sites that follow, in program order, a store to the same element (the
    same index expressions, inside the same loops): they read what their iteration stored."""
    stored, own = set(), set()
    for site in sites:
        key = (id(site.field), tuple(format_expr(e) for e in site.indices),
               tuple(map(id, site.loops)))
        if isinstance(site.node, ir.Store):
            stored.add(key)
        elif isinstance(site.node, ir.Load) and key in stored:
            own.add(id(site))
    return own
