"""Bad-index checkpoints: one range check of the integer locals a loop body indexes with, in
place of a guard at each access (fast mode's bad-index flag, compile/badindex.py).

mpm's particle-to-grid step computes `base = ti.cast(x[p] * inv_dx - 0.5, ti.i32)` from a float,
then adds into `grid_v[base + offset]` and `grid_m[base + offset]` for nine static offsets, and
its adjoint reads their gradients at the same nine: 27 guarded accesses a particle, which made
the benchmark's fwd+bwd 27-41% slower. Where `base` lies in [lo, hi] (each access's in-bounds
range for it, intersected), every one of those accesses is inside its field; so a loop body
checks its locals once, before the first such access, and the accesses themselves need no code.

If the check fails, the launch records the locals' values in the bad-index flag and clamps them
into their ranges (no access leaves its field), and runs on as after any bad index. The host
then finds the first of the covered accesses, in program order, that those values put outside
its field: the access interp mode stops at, whose index and line the error names. That access
is certain to run (see below), so a failed check is never a false report.

An access is covered when it is one of the body's own statements (not inside a branch, a
`select`'s operands or an inner loop) in a `for` loop with no `break` out of it, so that it
runs whenever the check does, and each of its indices is a constant or `v + c`: c a constant
(a static offset), v an integer local assigned once in the kernel, by one of the same body's
statements before the check. Any other access keeps its own guard (tinyad/check/reached.py
IndexProof says which).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tinyad.analysis.queries import direct_break
from tinyad.check.reached import IndexProof, _interval
from tinyad.core import ir


class Use(NamedTuple):
    """A covered access: its field, line, and per index either (None, constant, 0) or
    (position of v in the checkpoint's locals, c, bits of the sum's integer type)."""
    field: object
    loc: object
    dims: tuple
    indices_id: int         # id of the access's index tuple (compiled code looks it up so)


class Checkpoint(NamedTuple):
    """One loop body's range check, made before its statement `anchor`."""
    anchor: object          # the ir statement the check goes before
    names: tuple            # the locals checked, in the order the flag records them
    ranges: tuple           # (lowest, highest) each may take
    uses: tuple             # Use, in program order

    def first_outside(self, values):
        """(field, index, loc) of the first use that the locals' `values` put outside its
        field (interp mode's first bad access), or None."""
        for use in self.uses:
            index = tuple(c if k is None else _wrap(int(values[k]) + c, bits)
                          for k, c, bits in use.dims)
            sizes = (*use.field.shape, *use.field.element_shape)
            if any(not 0 <= i < n for i, n in zip(index, sizes)):
                return use.field, index, use.loc
        return None


def _wrap(value: int, bits: int) -> int:
    """`value` as a signed integer of `bits` bits (the compiled sum wraps so)."""
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half


class IndexChecks:
    """What compiled code checks of a kernel's indices: IndexProof's `launch_sites` before
    each launch; in the kernel the `checkpoints`, and a guard at each access `guarded` holds
    (ids of index tuples) that no checkpoint covers. `rank`: the most values one record of
    the bad-index flag holds (an access's indices, a checkpoint's locals)."""

    def __init__(self, kernel: ir.Kernel, everything: bool = False):
        proof = IndexProof(kernel, everything)
        guarded = proof.guarded_sites
        self.launch_sites = proof.launch_sites
        self.checkpoints = [] if everything else plan_checkpoints(kernel, guarded,
                                                                  proof.intervals)
        covered = _covered(self.checkpoints, guarded)
        guarded = [site for site in guarded if id(site.indices) not in covered]
        self.guarded = frozenset(id(site.indices) for site in guarded)
        self.rank = max([len(site.indices) for site in guarded]
                        + [len(c.names) for c in self.checkpoints], default=0)


def _covered(checkpoints, guarded) -> set:
    """ids of the index tuples whose every guarded access a checkpoint covers (two accesses
    may share one tuple, and compiled code guards by the tuple)."""
    left: dict = {}
    for site in guarded:
        left[id(site.indices)] = left.get(id(site.indices), 0) + 1
    for checkpoint in checkpoints:
        for use in checkpoint.uses:
            left[use.indices_id] -= 1
    return {key for key, count in left.items() if count == 0}


def plan_checkpoints(kernel: ir.Kernel, guarded: list, intervals) -> list:
    """The checkpoints that can replace the guards of some of `guarded` (analysis Sites).
    `intervals(site)`: the loop variables' and once-assigned locals' intervals around it."""
    counts: dict = {}        # how often each local is written (a restore, loop variable or
    for s in ir.walk_stmts(kernel.body):          # atomic's result counts as two: not once)
        written = {ir.Assign: 1, ir.Restore: 2, ir.For: 2, ir.AtomicOp: 2}.get(type(s), 0)
        name = getattr(s, "name", None) or getattr(s, "var", None) or getattr(s, "result", None)
        if written and name:
            counts[name] = counts.get(name, 0) + written
    wanted = {id(site.node): site for site in guarded}
    found = []
    for loop in ir.walk_stmts(kernel.body):
        if isinstance(loop, ir.For) and not direct_break(loop.body):
            checkpoint = _body_checkpoint(loop.body, wanted, counts, intervals)
            if checkpoint is not None:
                found.append(checkpoint)
    return found


def _body_checkpoint(body, wanted: dict, counts: dict, intervals) -> Checkpoint | None:
    """The checkpoint of one loop body, or None where no access of it can be covered."""
    defined: dict = {}               # local -> position of the statement assigning it
    uses: list = []                  # (position, site, dims by local name)
    for k, s in enumerate(body):
        if isinstance(s, ir.Assign) and counts.get(s.name) == 1 and s.value.dtype.is_int:
            defined[s.name] = k
        if not isinstance(s, (ir.Assign, ir.Store, ir.AtomicOp)):
            continue
        nodes = [x for e in ir.stmt_exprs(s) for x in _always_evaluated(e)
                 if isinstance(x, ir.Load)]
        nodes += [s] if isinstance(s, (ir.Store, ir.AtomicOp)) else []
        for node in nodes:
            site = wanted.get(id(node))
            dims = None if site is None else _offsets(site, intervals(site), defined)
            if dims is not None:
                uses.append((k, site, dims))
    if not uses:
        return None
    anchor = uses[0][0]          # locals assigned at or after the first use: not covered
    uses = [u for u in uses if all(v is None or defined[v] < anchor for v, _, _ in u[2])]
    ranges: dict = {}
    for _, site, dims in uses:
        for (v, c, _), n in zip(dims, (*site.field.shape, *site.field.element_shape)):
            if v is not None:
                lo, hi = ranges.get(v, (-(1 << 62), 1 << 62))
                ranges[v] = (max(lo, -c), min(hi, n - 1 - c))
    if not uses or any(lo > hi for lo, hi in ranges.values()):
        return None                 # (a field narrower than the stencil: each access guarded)
    names = tuple(sorted(ranges, key=defined.get))
    position = {v: i for i, v in enumerate(names)}
    return Checkpoint(body[anchor], names, tuple(ranges[v] for v in names), tuple(
        Use(site.field, site.node.loc,
            tuple((None if v is None else position[v], c, bits) for v, c, bits in dims),
            id(site.indices))
        for _, site, dims in uses))


def _always_evaluated(e):
    """The nodes of `e` that are evaluated whenever it is: not a `select`'s branches (interp
    mode evaluates only the one taken)."""
    yield e
    args = getattr(e, "args", ())
    if isinstance(e, ir.Op) and e.op == "select":
        args = args[:1]
    elif isinstance(e, ir.Load):
        args = e.indices
    for a in args:
        yield from _always_evaluated(a)


def _offsets(site, env: dict | None, defined: dict):
    """Per index of `site`: (None, constant, 0) or (v, c, bits) for `v + c`; None unless
    every index is one of these, in bounds where constant, and at least one has a local."""
    if env is None:
        return None
    dims = []
    for e, n in zip(site.indices, (*site.field.shape, *site.field.element_shape)):
        span = _interval(e, env)
        if span is not None:
            if span[0] != span[1] or not 0 <= span[0] < n:
                return None         # (a loop variable: the host could not tell its value)
            dims.append((None, span[0], 0))
            continue
        local, c = _local_plus_constant(e, env)
        if local not in defined:
            return None
        dims.append((local, c, np.iinfo(e.dtype.np).bits))
    return dims if any(v is not None for v, _, _ in dims) else None


def _local_plus_constant(e, env: dict):
    """(v, c) where `e` is the local v, v + c, c + v or v - c with c constant; else (None, 0)."""
    if isinstance(e, ir.Var):
        return e.name, 0
    if not (isinstance(e, ir.Op) and e.op in ("add", "sub") and len(e.args) == 2):
        return None, 0
    pairs = [e.args] if e.op == "sub" else [e.args, e.args[::-1]]
    for local, other in pairs:
        span = _interval(other, env)
        if isinstance(local, ir.Var) and span is not None and span[0] == span[1] \
                and local.dtype == e.dtype:
            return local.name, span[0] if e.op == "add" else -span[0]
    return None, 0
