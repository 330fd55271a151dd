"""Which rows (leading indices) of each field one launch may read and write, from the kernel's IR
and the launch's integer arguments: what the check "computed before the Tape" compares
(tinyad/check/launches.py). A time-stepped kernel at step t reads row t and writes row t + 1;
without its rows, a Tape that recomputes every step would look as if it read the rows a forward
pass before the Tape had computed. A launch's plan asks here (tinyad/check/regions.py)."""
from __future__ import annotations

from tinyad.analysis.sites import access_sites, fixed_int_args
from tinyad.check.spans import span_union
from tinyad.core import ir
from tinyad.core.printer import format_expr


class KernelRows:
    """One kernel's primal loads and writes, and their rows per launch (kept in the launch's
    plan: the launches alike share them, and may read them, never change them)."""

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

    def of_boxes(self, box_of) -> LaunchRows:
        """({field: spans read}, {field: spans written}) of a launch, given `box_of(site)`, its
        box for each site in `self.sites` (the launch's plan has worked them out:
        tinyad/check/regions.py)."""
        return LaunchRows(
            (spans_of((s.field, b) for s in self.loads if (b := box_of(s)) is not None),
             spans_of((s.field, b) for s in self.writes if (b := box_of(s)) is not None)))


class LaunchRows(tuple):
    """({field: spans read}, {field: spans written}) of one launch, and what a check made of
    them once (`steps`: tinyad/check/beforetape.py's), kept with them: a time-stepped
    kernel's launches share a few such rows, one per argument value (their plans')."""
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
