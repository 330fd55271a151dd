"""Serial reductions as lanes: a serial range loop whose iterations only read what the loop does
not write and add into fields (`loss[None] += f(x[...])`) runs as numpy lanes over its range.

Why: a serial loop runs one tree walk per iteration (~18 µs per statement); a loop of 10⁷
iterations (Taichi's test_large_for_loops_*) would take an hour. Such a loop is a reduction, and
its iterations can be computed together, as interp/lanes.py computes a parallel loop's.

When (`plan`, proven on the IR once): the body, after flattening a perfect nest of serial loops
whose bounds do not depend on the outer ones, is straight-line: assignments to locals that are
assigned before they are read in the body and read nowhere outside it (no value is carried from
iteration to iteration or out of the loop), atomics whose old value is not used, all atomics on
one field the same op, and loads only of fields that nothing in the loop writes. Then iteration
t's values depend on t alone, and the fields change only by the atomics.

What stays exactly as the scalar path does it:
  * values: the atomics are applied element by element in iteration order (`ufunc.at` is
    unbuffered and in order), so an f32 sum rounds as the scalar loop's does;
  * the checks: the lanes check every index's bounds. A memory that sees each access (a custom
    gradient check's access sets, tinyad/customcheck.py; the f64 shadow; the NaN locator) sees
    each element a load reads, and each element an atomic updates, once through its scalar
    `load` and `atomic`: repeating the same read, or the same atomic, changes nothing those
    keep. Plain memory sees nothing more there, so its loops skip that pass;
  * errors: out-of-bounds indices raise the scalar path's error (the lanes check them first).
"""
from __future__ import annotations

import numpy as np

from tinyad.core import ir
from tinyad.interp import lanes
from tinyad.interp.memory import Memory

# Below this many iterations the scalar walk is as quick: the loop runs there.
MIN_ITERATIONS = 32


def _nest(loop: ir.For):
    """The perfect nest of serial loops starting at `loop`, outermost first, and the innermost
    body; an inner loop's bounds may not use an outer loop's variable."""
    nest, body = [loop], loop.body
    while len(body) == 1 and isinstance(body[0], ir.For) and not body[0].parallel:
        inner = body[0]
        used = {v.name for e in (inner.start, inner.stop) for v in ir.walk_expr(e)
                if isinstance(v, ir.Var)}
        if used & {n.var for n in nest}:
            break
        nest.append(inner)
        body = inner.body
    return nest, body


def _reads(exprs):
    return {v.name for e in exprs for v in ir.walk_expr(e) if isinstance(v, ir.Var)}


def _loads(exprs):
    return [x for e in exprs for x in ir.walk_expr(e) if isinstance(x, ir.Load)]


def plan(loop: ir.For, kernel: ir.Kernel):
    """-> (nest, body) when `loop` may run as lanes (see the module's doc), else None."""
    if loop.parallel:
        return None
    nest, body = _nest(loop)
    if _loads([e for n in nest for e in (n.start, n.stop)]):
        return None          # bounds read from fields: the scalar loop reads them (checked)
    assigned: set = set()
    written: set = set()
    atomic_ops: dict = {}
    loads = []
    for s in body:
        exprs = ir.stmt_exprs(s)
        if isinstance(s, ir.Assign):
            pass
        elif isinstance(s, ir.AtomicOp) and s.result is None:
            if s.value.dtype != s.field.dtype:
                return None  # the scalar path converts old + value, not value: keep its way
            if atomic_ops.setdefault(id(s.field), s.op) != s.op:
                return None
            written.add(id(s.field))
        else:
            return None      # stores, branches, inner loops that are no perfect nest, ...
        if any(isinstance(x, ir.Op) and x.op == "random" for e in exprs for x in ir.walk_expr(e)):
            return None      # ti.random() draws in the scalar order
        if _reads(exprs) & (_assigned_in(body) - assigned):
            return None      # read before this iteration assigns it: carried
        loads += _loads(exprs)
        if isinstance(s, ir.Assign):
            assigned.add(s.name)
    if not written or any(id(x.field) in written for x in loads):
        return None
    if assigned & _reads_outside(kernel, loop):
        return None          # its value after the loop is read: the lanes would not set it
    return nest, body


def _assigned_in(body) -> set:
    return {s.name for s in body if isinstance(s, ir.Assign)}


def _reads_outside(kernel: ir.Kernel, loop: ir.For) -> set:
    inside = {id(s) for s in ir.walk_stmts(loop.body)}
    names: set = set()
    for s in ir.walk_stmts(kernel.body):
        if id(s) not in inside:
            names |= _reads(ir.stmt_exprs(s))
    return names


class _Buffered(lanes.PlainLanes):
    """Lane memory for one chunk: loads read the arrays (each element read once through the
    scalar memory, where a subclass of Memory watches accesses); atomics wait in order until
    `flush`."""

    def __init__(self, memory):
        super().__init__(memory)
        self.events: list = []          # (op, field, flat indices, values, site)
        self.reads_logged: set = set()  # (site, element): read through the scalar memory
        self.watched = type(memory) is not Memory   # (plain memory: the lanes' bounds suffice)

    def load(self, fld, idx, lanes_, site):
        if not self.watched:
            return super().load(fld, idx, lanes_, site)
        for element in _elements(self.memory.array(fld), idx):
            if (id(site), element) not in self.reads_logged:
                self.reads_logged.add((id(site), element))
                self.memory.load(fld, element, site)     # bounds, a custom check's sets
        return super().load(fld, idx, lanes_, site)

    def atomic(self, op, fld, idx, values, lanes_, site):
        data = self.checked(fld, idx, site)
        flat = np.ravel_multi_index(idx, data.shape) if idx else np.zeros(len(values), np.intp)
        self.events.append((op, fld, flat, np.asarray(values, dtype=data.dtype), site))

    def flush(self):
        """Apply this chunk's atomics in iteration order; where the memory watches accesses,
        each element's last one goes through its scalar `atomic`, so a custom check's sets see
        one atomic per element."""
        by_field: dict = {}
        for event in self.events:
            by_field.setdefault(id(event[1]), []).append(event)
        for events in by_field.values():
            op, fld = events[0][0], events[0][1]
            # iteration-major order: lane 0's atomics in statement order, then lane 1's, ...
            if len(events) == 1:
                flat, values = events[0][2], events[0][3]
            else:
                flat = np.stack([e[2] for e in events], axis=1).ravel()
                values = np.stack([e[3] for e in events], axis=1).ravel()
            sites = [e[4] for e in events]
            data = self.memory.array(fld)
            view = data.reshape(-1)
            if not self.watched:
                lanes.ATOMIC_UFUNCS[op].at(view, flat, values)
                continue
            if flat.min() == flat.max():      # one element (a sum into a scalar): no sort
                uniques, last = flat[:1], np.array([len(flat) - 1])
            else:
                uniques, first_from_end = np.unique(flat[::-1], return_index=True)
                last = len(flat) - 1 - first_from_end
            rest = np.ones(len(flat), dtype=bool)
            rest[last] = False
            lanes.ATOMIC_UFUNCS[op].at(view, flat[rest], values[rest])
            for element, position in zip(uniques, last):
                index = np.unravel_index(int(element), data.shape) if data.ndim else ()
                self.memory.atomic(op, fld, tuple(int(i) for i in index), values[position],
                                   sites[position % len(sites)])
        self.events = []


def _elements(data, idx):
    """The distinct elements a lane access touches, as index tuples."""
    if not idx:
        return [()]
    parts = [np.asarray(p) for p in idx]
    if all(p.ndim == 0 for p in parts):
        return [tuple(int(p) for p in parts)]
    n = max(p.size for p in parts if p.ndim)
    columns = [np.broadcast_to(p, (n,)) for p in parts]
    if len(columns) == 1:
        return [(int(i),) for i in np.unique(columns[0])]
    rows = np.unique(np.stack(columns, axis=1), axis=0)
    return [tuple(int(i) for i in row) for row in rows]


def compile_loop(loop: ir.For, kernel: ir.Kernel, scalar_run):
    """-> run(frame) that runs `loop` as lanes when it has enough iterations (else
    `scalar_run`, the evaluator's closure), or None when `plan` refuses the loop."""
    planned = plan(loop, kernel)
    if planned is None:
        return None
    nest, body = planned
    try:
        compiler = lanes._LaneCompiler()
        run_body = compiler.block(body)
        bounds = [(compiler.expr(n.start), compiler.expr(n.stop)) for n in nest]
    except lanes.Unsupported:
        return None

    def run(fr):
        if not _runnable(fr.mem, body):
            return scalar_run(fr)
        probe = lanes.LaneRun(fr.env, np.zeros(0, np.int32), None)
        ranges = [(int(lo(probe, None)), int(hi(probe, None))) for lo, hi in bounds]
        extents = [max(hi - lo, 0) for lo, hi in ranges]
        total = int(np.prod(extents, dtype=np.int64))
        if total < MIN_ITERATIONS:
            return scalar_run(fr)
        memory = _Buffered(fr.mem)
        for begin in range(0, total, lanes.CHUNK):
            t = np.arange(begin, min(begin + lanes.CHUNK, total), dtype=np.int64)
            chunk = lanes.LaneRun(dict(fr.env), t.astype(np.int32), memory)
            for n, (lo, hi), extent, stride in zip(nest, ranges, extents, _strides(extents)):
                position = (t // stride) % extent
                chunk.env[n.var] = (hi - 1 - position if n.reverse else lo + position
                                    ).astype(np.int32)
            run_body(chunk, None)
            memory.flush()
        for n, (lo, hi), extent in zip(nest, ranges, extents):
            if extent:           # the loop variables as the scalar loop leaves them
                fr.env[n.var] = np.int32(lo if n.reverse else hi - 1)
    return run


def _strides(extents):
    strides, step = [], 1
    for extent in reversed(extents):
        strides.append(step)
        step *= extent
    return strides[::-1]


def _runnable(memory, body) -> bool:
    """Whether every field the loop adds into is one C-contiguous array (flush writes through
    a flat view) that no field it reads shares memory with (two ndarray arguments may be one
    array: then a read could see an earlier iteration's write)."""
    written = [memory.array(s.field) for s in body if isinstance(s, ir.AtomicOp)]
    read = [memory.array(x.field) for x in _loads(e for s in body for e in ir.stmt_exprs(s))]
    return all(w.flags.c_contiguous for w in written) and \
        not any(np.may_share_memory(w, r) for w in written for r in read)


def serial_work(loop: ir.For, kernel: ir.Kernel, outer_locals: frozenset):
    """For a parallel loop: -> f(frame) -> the iterations of the largest serial loop nest in its
    body that runs as lanes (0 if none, or its bounds need the parallel loop's own locals).
    The evaluator runs the parallel loop on the scalar path when that is more than its own
    iteration count: the serial loop's lanes are then the longer ones."""
    counters = []
    for s in ir.walk_stmts(loop.body):
        if isinstance(s, ir.For) and not s.parallel and plan(s, kernel) is not None:
            nest, _ = _nest(s)
            if _reads([e for n in nest for e in (n.start, n.stop)]) <= outer_locals:
                counters.append(nest)
    if not counters:
        return None
    compiler = lanes._LaneCompiler()
    sized = [[(compiler.expr(n.start), compiler.expr(n.stop)) for n in nest]
             for nest in counters]

    def work(fr):
        probe = lanes.LaneRun(fr.env, np.zeros(0, np.int32), None)
        best = 0
        for bounds in sized:
            count = 1
            try:
                for lo, hi in bounds:
                    count *= max(int(hi(probe, None)) - int(lo(probe, None)), 0)
            except KeyError:     # a local the kernel assigns only after this loop
                count = 0
            best = max(best, count)
        return best
    return work
