"""Every global access of a kernel with the loops around it (a `Site`), and the integer
arguments a launch fixes: what the checker's proofs reason about (tinyad/check/boxes.py,
hazards.py, reached.py) and what fast mode's recorded variant instruments."""
from __future__ import annotations

from tinyad.analysis.queries import assigned
from tinyad.core import ir


class Site:
    """One global access (a Load, Store or AtomicOp node) with the loops around it, outer first,
    and for each loop the integer locals its body assigns once (the indices of a flattened
    ndrange, a neighbour's index), which `box` follows."""

    def __init__(self, node, loops: tuple, preludes: dict):
        self.node, self.loops, self.preludes = node, loops, preludes
        self.field, self.indices = node.field, node.indices


def access_sites(kernel: ir.Kernel) -> list:
    """Every global access of a kernel, in program order, as a `Site`."""
    sites, preludes = [], {}
    counts: dict = {}
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Assign):
            counts[s.name] = counts.get(s.name, 0) + 1

    def visit(block, loops):
        for s in block:
            if isinstance(s, (ir.Store, ir.AtomicOp)):
                sites.extend(Site(x, loops, preludes) for e in ir.stmt_exprs(s)
                             for x in ir.walk_expr(e) if isinstance(x, ir.Load))
                sites.append(Site(s, loops, preludes))
                continue
            for e in ir.stmt_exprs(s):
                sites.extend(Site(x, loops, preludes) for x in ir.walk_expr(e)
                             if isinstance(x, ir.Load))
            inner = loops + (s,) if isinstance(s, (ir.For, ir.While)) else loops
            if isinstance(s, ir.For):
                preludes[id(s)] = tuple(_single_int_assigns(s.body, counts))
            for block_ in ir.child_blocks(s):
                visit(block_, inner)
    visit(kernel.body, ())
    return sites


def _single_int_assigns(block, counts: dict):
    """(name, value) of the integer locals a loop body assigns exactly once in the kernel, in
    program order, branches included, inner loops not (theirs are the inner loop's). Taichi
    scopes a local to its block, so wherever one is read its value is that expression, of
    its operands then (a local assigned more than once has no interval: unbounded). A
    bounds-guarded stencil computes its neighbours' indices (j - 1, t - 2) so."""
    for s in block:
        if isinstance(s, ir.Assign) and counts.get(s.name) == 1 and s.value.dtype.is_int:
            yield s.name, s.value
        elif isinstance(s, ir.If):
            for inner in ir.child_blocks(s):
                yield from _single_int_assigns(inner, counts)


def fixed_int_args(kernel: ir.Kernel) -> tuple:
    """The integer scalar arguments no statement reassigns: their launch values hold
    throughout, so a box may depend on them."""
    changed = assigned(kernel.body)
    return tuple(a.name for a in kernel.args if a.dtype.is_int and a.name not in changed)
