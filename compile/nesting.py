"""Flat ndrange loops back to nested loops, for the CPU code generator.

The frontend turns `for i, j in ti.ndrange(n, m)` (and struct-for over an n-d field) into one
flat loop whose indices come back through // and % (tinyad/frontend_loops.py):

    for I in range(0, n * m):  parallel          for i in range(0, n):  parallel
      i: i32 = I // m                     ->       for j in range(0, m):
      j: i32 = I % m                                 ...
      ...

The flat form suits autodiff (one parallel loop of independent iterations). Compiled, it costs
a division per index and hides the unit stride: LLVM vectorizes `for j in range(m)` over a row,
not `j = I % m` (about 10x on a stencil). The nested loops visit the same indices in the same
order; only the outermost keeps `parallel`, so the code generator gives threads whole rows.
"""
from __future__ import annotations

import math

from tinyad.analysis.queries import assigned, referenced
from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T


def nest_loops(kernel: ir.Kernel) -> tuple[ir.Kernel, dict]:
    """-> (the kernel with every flat ndrange loop nested, {id(outer loop): its total trip})."""
    trips: dict[int, int] = {}
    body = _rewrite(kernel.body, trips)
    return ir.Kernel(kernel.name, kernel.args, tuple(body), kernel.ret, kernel.loc), trips


def _rewrite(stmts, trips) -> list:
    out = []
    for s in stmts:
        s = ir.with_blocks(s, [_rewrite(b, trips) for b in ir.child_blocks(s)])
        if isinstance(s, ir.For) and not _draws_random(s):   # ti.random(): one stream per flat
            nested = _nest(s)                                   # iteration, as in interp mode
            if nested is not None:
                trips[id(nested)] = int(s.stop.value)
                s = nested
        out.append(s)
    return out


def _nest(loop: ir.For) -> ir.For | None:
    if not (isinstance(loop.start, ir.Const) and int(loop.start.value) == 0
            and isinstance(loop.stop, ir.Const)):
        return None
    dims = []              # (name, stride, modulus or None, start) per index, outermost first
    for s in loop.body:
        term = _index_term(s, loop.var) if isinstance(s, ir.Assign) else None
        if term is None:
            break
        dims.append((s.name, *term))
    if len(dims) < 2:
        return None
    extents = _extents(dims, int(loop.stop.value))
    rest = loop.body[len(dims):]
    names = {name for name, *_ in dims}
    if extents is None or loop.var in referenced(rest) or names & assigned(rest):
        return None
    inner = tuple(rest)
    for k in reversed(range(len(dims))):
        name, start = dims[k][0], dims[k][3]
        inner = (ir.For(name, B.const(start, T.i32), B.const(start + extents[k], T.i32), inner,
                        loop.parallel and k == 0, loop.reverse, loop.loc),)
    return inner[0]


def _index_term(s: ir.Assign, var: str):
    """`var // stride % modulus + start` (each part optional, ints) -> the three, or None."""
    value = s.value
    if value.dtype != T.i32:
        return None
    start = modulus = None
    if _op_with_const(value, "add"):
        value, start = value.args[0], int(value.args[1].value)
    if _op_with_const(value, "mod"):
        value, modulus = value.args[0], int(value.args[1].value)
    stride = 1
    if _op_with_const(value, "floordiv"):
        value, stride = value.args[0], int(value.args[1].value)
    if not (isinstance(value, ir.Var) and value.name == var):
        return None
    return stride, modulus, start or 0


def _op_with_const(e, op) -> bool:
    return isinstance(e, ir.Op) and e.op == op and isinstance(e.args[1], ir.Const)


def _extents(dims, total: int):
    """Each index's extent, if the strides and moduli are those of a row-major box of `total`
    points; else None."""
    extents = [modulus for _, _, modulus, _ in dims]
    if extents[0] is not None or any(e is None or e <= 0 for e in extents[1:]):
        return None
    for k, (_, stride, _, _) in enumerate(dims):
        if stride != math.prod(extents[k + 1:]):
            return None
    if total % dims[0][1]:
        return None
    extents[0] = total // dims[0][1]
    return extents


def _draws_random(loop: ir.For) -> bool:
    return any(isinstance(x, ir.Op) and x.op == "random" for s in ir.walk_stmts(loop.body)
               for e in ir.stmt_exprs(s) for x in ir.walk_expr(e))


def segments(body, parallel: dict) -> list[tuple[str, list]]:
    """A kernel's top-level statements cut at its parallel loops (ids in `parallel`): runs of
    ("serial", statements) between ("parallel", [loop]). The CUDA and pooled CPU modules
    launch each piece on its own."""
    out, current = [], []
    for s in body:
        if isinstance(s, ir.For) and id(s) in parallel:
            if current:
                out.append(("serial", current))
                current = []
            out.append(("parallel", [s]))
        else:
            current.append(s)
    if current:
        out.append(("serial", current))
    return out


def carried_locals(refs: list, writes: list, names) -> list:
    """The locals (of `names`, in order) that one piece assigns (`writes[i]`) and another uses
    (`refs[j]`): they travel between the launched pieces in one-element arrays."""
    return [n for n in names if any(
        n in writes[i] and any(n in refs[j] for j in range(len(refs)) if j != i)
        for i in range(len(refs)))]
