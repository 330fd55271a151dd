"""A stencil's adjoint as a gather: shifted scatter-adds out of a parallel loop, into a second.

Reverse mode turns a stencil's reads `p[t, i + 1, j]` into scatter-adds `p.grad[t, i + 1, j] +=
g`. Compiled as written they need atomics or row-blocked phases, and the adds into a row's
neighbours (`[j + 1]`, `[j - 1]`) form a chain LLVM cannot vectorize. This rewrite (CPU, on the
nested loops of compile/nesting.py) splits such a loop in two:

    for i, j in box:  parallel                  for i, j in box:  parallel        (A)
      ...                                         ...
      g1 = ...                                    g1 = ...
      F[t, i + 1, j] += g1            ->          scratch[i - o0, j - o1] = g1
      F[t, i - 1, j] += g1                        ...
      ...                                       for x, y in box + shifts:  parallel   (B)
                                                  F[t, x, y] += scratch[x - 1 - o0, y - o1]
                                                              + scratch[x + 1 - o0, y - o1]

(A) keeps every other statement where it was; each shifted add's value is written to a zeroed
scratch buffer (one per value) at its iteration's point instead; (B) adds the buffers, shifted,
into the target box: each iteration owns its element, no atomics, and both loops vectorize.

It applies only where the IR proves it sound:
  * a perfect nest of loops with constant bounds whose body is straight-line (no branches, loops,
    saves, random numbers), loop variables not assigned in it;
  * a moved add's value has the field's type (an add into an int field of a float converts
    after adding), and its indices are, per position, a loop variable plus a constant (each
    variable in one position: an injective shift) or an expression the loop does not change (no
    loads, no locals the loop assigns); adds with all shifts zero stay (their iteration owns
    them);
  * every other access of the same field in the loop is itself an add (adds commute) or provably
    touches other elements: at some loop-invariant position `e + c` against `e + c'`, c != c';
  * the target box lies inside the field's shape (constant bounds: checked here), so (B) never
    indexes outside it. Points of the box no iteration adds to get `+= 0.0`.
Moving adds later changes only the order in which float adds round (as threads already do).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tinyad.analysis.queries import accesses, assigned
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.printer import format_expr

SCRATCH_BYTES = 64 << 20     # the largest scratch buffer (per moved value) this makes


@dataclass(eq=False)
class Scratch:
    """A buffer the generated function allocates itself (zero outside what the first loop
    fills): not a user field, no parameter."""
    name: str
    dtype: T.DType
    shape: tuple
    filled: tuple = ()            # per dimension, the (start, stop) the first loop writes
    element_shape: tuple = ()
    is_scratch = True

    def allocation(self, name: str, np_type: str, loop_vars: list) -> list[str]:
        """Source lines making the buffer: uninitialised, then zeros around what the first loop
        fills (every launch fills all of that). Serial loops: in a `parallel=True` function a
        slice assignment would be a parallel region of its own, each launch."""
        first = (f"{name} = np.empty({tuple(self.shape)}, {np_type})"
                 "  # shifted adds, gathered (compile/gather.py)")
        lines = [first]
        element = f"{name}[{', '.join(loop_vars)}] = 0"
        for k, (a, b) in enumerate(self.filled):
            for lo, hi in ((0, a), (b, self.shape[k])):
                if hi <= lo:
                    continue
                for d, var in enumerate(loop_vars):
                    bounds = f"{lo}, {hi}" if d == k else f"{self.shape[d]}"
                    lines.append("    " * d + f"for {var} in range({bounds}):")
                lines.append("    " * len(loop_vars) + element)
        return lines


def is_scratch(fld) -> bool:
    return getattr(fld, "is_scratch", False)


@dataclass
class _Move:
    stmt: ir.AtomicOp
    shifts: tuple            # the constant added to each loop variable, in nest order
    group: int               # which scratch buffer holds its value


@dataclass
class _Family:
    """Moved adds into one field at one pattern of loop-invariant positions."""
    fld: object
    pattern: tuple           # per index position: ("var", k) or ("fixed", base text, constant)
    template: tuple          # the first add's index expressions (its fixed ones are reused)
    moves: list = field(default_factory=list)


def split_gathers(kernel: ir.Kernel, work: dict) -> tuple[ir.Kernel, dict]:
    """-> (the kernel with each qualifying top-level parallel nest split in two, the trip counts
    of compile/nesting.py with the new loops' added)."""
    body, work = [], dict(work)
    taken = set(ir.local_types(kernel))
    for s in kernel.body:
        split = _split(s, taken) if isinstance(s, ir.For) and s.parallel else None
        if split is None:
            body.append(s)
            continue
        work[id(split[0])] = work.get(id(s)) or _box_size(split[0])
        for gather in split[1:]:
            work[id(gather)] = _box_size(gather)
        body += split
    return ir.Kernel(kernel.name, kernel.args, tuple(body), kernel.ret, kernel.loc), work


def _nest(loop: ir.For):
    """-> ([(var, lo, hi)], innermost body) for a perfect nest of constant-bound loops, or None."""
    dims = []
    while True:
        if loop.reverse or not (isinstance(loop.start, ir.Const)
                                and isinstance(loop.stop, ir.Const)):
            return None
        lo, hi = int(loop.start.value), int(loop.stop.value)
        if hi <= lo:
            return None
        dims.append((loop.var, lo, hi))
        inner = loop.body
        if len(inner) == 1 and isinstance(inner[0], ir.For) and not inner[0].parallel:
            loop = inner[0]
            continue
        return dims, inner


def _straight(body) -> bool:
    for s in body:
        if not isinstance(s, (ir.Assign, ir.Store, ir.AtomicOp)):
            return False
        for e in ir.stmt_exprs(s):
            if any(isinstance(x, ir.Op) and x.op == "random" for x in ir.walk_expr(e)):
                return False
    return True


def _affine(e, var):
    """`var + c` / `var - c` / `var` -> c, else None."""
    if isinstance(e, ir.Var):
        return 0 if e.name == var else None
    if (isinstance(e, ir.Op) and e.op in ("add", "sub") and isinstance(e.args[0], ir.Var)
            and e.args[0].name == var and isinstance(e.args[1], ir.Const)):
        return int(e.args[1].value) * (1 if e.op == "add" else -1)
    return None


def _split_constant(e):
    """An invariant index as (base text, constant): `t + 1` -> ("t", 1), `3` -> ("", 3)."""
    if isinstance(e, ir.Const):
        return "", int(e.value)
    if isinstance(e, ir.Op) and e.op in ("add", "sub") and isinstance(e.args[1], ir.Const):
        c = int(e.args[1].value)
        return format_expr(e.args[0]), c if e.op == "add" else -c
    return format_expr(e), 0


def _pattern(indices, loop_vars, changing):
    """-> (pattern, shifts) for an index tuple of the moved kind, else None."""
    pattern, shifts, seen = [], [0] * len(loop_vars), set()
    for e in indices:
        names = {x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var)}
        if e.dtype != T.i32:
            return None
        hit = [k for k, v in enumerate(loop_vars) if _affine(e, v) is not None]
        if hit:
            k = hit[0]
            if k in seen:
                return None
            seen.add(k)
            shifts[k] = _affine(e, loop_vars[k])
            pattern.append(("var", k))
        elif names & changing or any(isinstance(x, ir.Load) for x in ir.walk_expr(e)):
            return None
        else:
            pattern.append(("fixed", *_split_constant(e)))
    if len(seen) != len(loop_vars):
        return None
    return tuple(pattern), tuple(shifts)


def _disjoint(indices, pattern, changing) -> bool:
    """Does an access at `indices` provably miss every element the family's adds touch?"""
    for e, slot in zip(indices, pattern):
        if slot[0] != "fixed":
            continue
        names = {x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var)}
        if names & changing or any(isinstance(x, ir.Load) for x in ir.walk_expr(e)):
            continue
        base, c = _split_constant(e)
        if base == slot[1] and c != slot[2]:
            return True
    return False


def _families(body, loop_vars, changing):
    families: dict = {}
    for s in body:
        # the value already of the field's type: an add converts after adding (int(f + 0.7)),
        # a buffer would convert before
        if not (isinstance(s, ir.AtomicOp) and s.op in ("add", "sub") and s.result is None
                and not is_scratch(s.field) and s.value.dtype == s.field.dtype):
            continue
        found = _pattern(s.indices, loop_vars, changing)
        if found is None or not any(found[1]):
            continue
        pattern, shifts = found
        fam = families.setdefault((id(s.field), pattern), _Family(s.field, pattern, s.indices))
        fam.moves.append(_Move(s, shifts, -1))
    return list(families.values())


def _commutes_or_misses(fam: _Family, body, changing) -> bool:
    moved = {id(m.stmt) for m in fam.moves}
    for fld, indices, node in accesses(body):
        if fld is not fam.fld or id(node) in moved:
            continue
        if isinstance(node, ir.AtomicOp) and node.op in ("add", "sub") and node.result is None:
            continue
        if not _disjoint(indices, fam.pattern, changing):
            return False
    return True


def _target_box(fam: _Family, dims):
    """Per loop variable: (lo, hi) of the elements the moved adds reach, or None if out of the
    field's shape."""
    extents = (*fam.fld.shape, *fam.fld.element_shape)
    box = []
    for k, (_, lo, hi) in enumerate(dims):
        position = fam.pattern.index(("var", k))
        shifts = [m.shifts[k] for m in fam.moves]
        a, b = lo + min(shifts), hi + max(shifts)
        if a < 0 or b > extents[position]:
            return None
        box.append((a, b))
    return box


def _group(fam: _Family, body):
    """Adds of one local's unchanged value share a buffer; -> number of buffers."""
    groups, last_value = [], {}
    for s in body:
        if isinstance(s, ir.Assign) or (isinstance(s, ir.AtomicOp) and s.result):
            last_value.pop(s.name if isinstance(s, ir.Assign) else s.result, None)
        for m in fam.moves:
            if m.stmt is s:
                key = s.value.name if isinstance(s.value, ir.Var) else None
                if key is not None and key in last_value:
                    m.group = last_value[key]
                else:
                    m.group = len(groups)
                    groups.append(m)
                    if key is not None:
                        last_value[key] = m.group
    return groups


def _i32(value):
    return ir.Const(int(value), T.i32)


def _shifted(var, c):
    v = ir.Var(var, T.i32)
    if c == 0:
        return v
    return ir.Op("add" if c > 0 else "sub", (v, _i32(abs(c))), T.i32)


def _split(loop: ir.For, taken: set):
    nest = _nest(loop)
    if nest is None:
        return None
    dims, body = nest
    if not _straight(body):
        return None
    loop_vars = [v for v, _, _ in dims]
    changing = assigned(body) | set(loop_vars)
    if set(loop_vars) & assigned(body):
        return None
    plans = []
    for fam in _families(body, loop_vars, changing):
        if not _commutes_or_misses(fam, body, changing):
            continue
        box = _target_box(fam, dims)
        if box is None:
            continue
        plans.append((fam, box))
    if not plans:
        return None
    replaced, gathers = {}, []
    for f, (fam, box) in enumerate(plans):
        spread = [max(m.shifts[k] for m in fam.moves) - min(m.shifts[k] for m in fam.moves)
                  for k in range(len(dims))]
        # the buffer covers every source a target of the box reads: box - shifts
        origin = [lo - spread[k] for k, (_, lo, _) in enumerate(dims)]
        shape = tuple(hi - lo + 2 * spread[k] for k, (_, lo, hi) in enumerate(dims))
        dtype = fam.fld.dtype
        if math.prod(shape) * dtype.np(0).itemsize > SCRATCH_BYTES:
            return None
        firsts = _group(fam, body)
        filled = tuple((spread[k], spread[k] + hi - lo) for k, (_, lo, hi) in enumerate(dims))
        buffers = [Scratch(_fresh(f"{fam.fld.name}_shifted", taken), dtype, shape, filled)
                   for _ in firsts]
        for g, m in enumerate(firsts):
            at_source = tuple(_shifted(v, -origin[k]) for k, v in enumerate(loop_vars))
            replaced[id(m.stmt)] = ir.Store(buffers[g], at_source, m.stmt.value, m.stmt.loc)
        for m in fam.moves:
            replaced.setdefault(id(m.stmt), None)
        gathers.append(_gather_loop(fam, box, buffers, origin, taken, loop.loc))
    new_body = tuple(replaced.get(id(s), s) for s in body if replaced.get(id(s), s) is not None)
    return [_rebuild(loop, new_body), *gathers]     # one gather loop per family, in order


def _fresh(base: str, taken: set) -> str:
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _gather_loop(fam: _Family, box, buffers, origin, taken, loc) -> ir.For:
    names = [_fresh(f"to_{k}", taken) for k in range(len(box))]
    total = None
    for m in fam.moves:
        at = tuple(_shifted(names[k], -m.shifts[k] - origin[k]) for k in range(len(box)))
        term = ir.Load(buffers[m.group], at, fam.fld.dtype)
        if total is None:
            total = term if m.stmt.op == "add" else ir.Op("neg", (term,), fam.fld.dtype)
        else:
            total = ir.Op(m.stmt.op, (total, term), fam.fld.dtype)
    indices = tuple(_shifted(names[slot[1]], 0) if slot[0] == "var" else fixed
                    for slot, fixed in zip(fam.pattern, fam.template))
    inner = (ir.AtomicOp("add", fam.fld, indices, total, None, fam.moves[0].stmt.loc),)
    for k in reversed(range(len(box))):
        inner = (ir.For(names[k], _i32(box[k][0]), _i32(box[k][1]), inner, k == 0, False, loc),)
    return inner[0]


def _rebuild(loop: ir.For, body) -> ir.For:
    if len(loop.body) == 1 and isinstance(loop.body[0], ir.For) and not loop.body[0].parallel:
        return ir.For(loop.var, loop.start, loop.stop, (_rebuild(loop.body[0], body),),
                      loop.parallel, loop.reverse, loop.loc)
    return ir.For(loop.var, loop.start, loop.stop, tuple(body), loop.parallel, loop.reverse,
                  loop.loc)


def _box_size(loop: ir.For) -> int:
    nest = _nest(loop)
    return math.prod(hi - lo for _, lo, hi in nest[0])
