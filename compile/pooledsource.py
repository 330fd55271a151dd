"""CPU source for kernels with parallel loops: serial numba functions run by a thread pool.

The kernel's top level is cut into segments, as for CUDA (compile/cudasource.py): each planned
parallel loop (compile/plan.py) is one segment, the statements between them another. Every
segment is a serial `njit(nogil=True)` function; a parallel one takes (chunk, chunks) first and
runs that chunk of the range. A plain Python function under the kernel's name runs the segments
in order and the parallel ones on compile/pool.py's threads.

Why: numba compiles a serial function about 4x faster than the same code under
`parallel=True` (mpm's kernels: 12 s against 52 s of CPU), and the chunks are the ones the
parfors code had (`_CHUNKS` per-chunk copies and sums, blocked stencils), so the results are
the same. Top-level locals that one segment assigns and another reads travel in one-element
arrays made by the driver (zero to start, like a local read before it is assigned).

Kernels this scheme does not cover keep the parfors module of compile/pysource.py: a return
value, a top-level save stack shared by two segments, ti.random()
at the top level after the first parallel loop (its stream runs through the whole kernel).
"""
from __future__ import annotations

from tinyad.analysis.queries import assigned, referenced
from tinyad.compile.gather import split_gathers
from tinyad.compile.nesting import carried_locals, nest_loops, segments
from tinyad.compile.pysource import (
    BAD_TYPE,
    NO_CFUNC,
    NP_TYPE,
    NUMBA_TYPE,
    Ctx,
    Generated,
    Generator,
    _count_and_base,
    fast_math_option,
    generate_cpu,
    parallel_min_default,
)
from tinyad.compile.pysource import chunks as _chunk_count
from tinyad.core import ir

# A parallel loop whose iterations times statements are fewer than this runs on one thread
# (handing chunks to the pool costs about 10-30 us), unless threads are forced
# (TINYAD_PARALLEL_MIN=0).
MIN_WORK = 20_000


def _draws_random(stmts) -> bool:
    return any(isinstance(x, ir.Op) and x.op == "random"
               for s in ir.walk_stmts(stmts) for e in ir.stmt_exprs(s) for x in ir.walk_expr(e))


class PooledModule:
    def __init__(self, gen: Generator):
        self.gen = gen

    def segments(self):
        return segments(self.gen.kernel.body, self.gen.loops)

    def covered(self, segments) -> bool:
        gen = self.gen
        if gen.kernel.ret is not None:
            return False
        for name, scope in gen.stack_scope.items():
            if scope is None and sum(name in referenced(st) for _, st in segments) > 1:
                return False
        first_loop = next(i for i, (kind, _) in enumerate(segments) if kind == "parallel")
        return not any(kind == "serial" and i > first_loop and _draws_random(st)
                       for i, (kind, st) in enumerate(segments))

    # ---- pieces -----------------------------------------------------------------------------
    def signature(self, leading: list[str], trailing: list[str]) -> str:
        gen = self.gen
        parts = leading + [f"types.Array(types.{NUMBA_TYPE[f.dtype.name]}, {ir.array_rank(f)}, "
                           "\"C\")" for f in gen.fields]
        parts += [f"types.{NUMBA_TYPE[a.dtype.name]}" for a in gen.kernel.args]
        if gen.uses_random:
            parts.append("types.int64")
        if gen.bad:
            parts.append(BAD_TYPE)
        parts += trailing
        return "types.none(\n    " + ",\n    ".join(parts) + ",\n)"

    def function(self, name, leading, trailing, doc, lines) -> list[str]:
        """One segment: `def name(*leading, *kernel params, *trailing)` over `lines`."""
        gen = self.gen
        options = ["nogil=True", "error_model=\"numpy\"", f"cache={not gen.uses_print}", NO_CFUNC]
        if gen.fast_math:
            options.append(fast_math_option())
        sig = self.signature([t for _, t in leading], [t for _, t in trailing])
        params = [n for n, _ in leading] + gen.params() + [n for n, _ in trailing]
        return ["", "", f"@njit({sig}, {', '.join(options)})",
                f"def {name}({', '.join(params)}):", f'    """{doc}"""', *lines]

    def start(self, refs, carry, index):
        """A segment's first lines: 0-d views, zeroed locals, the carried locals' values."""
        gen = self.gen
        for f in gen.fields:
            if ir.array_rank(f) == 0 and id(f) in self.segment_fields:
                gen.line(1, f"{gen.arrays[id(f)]} = one_element({gen.field_names[id(f)]})"
                         "  # a 0-d field as 1 element")
        ctx = Ctx(None, "_rs")
        gen.scope_prologue(None, 1, ctx, index=index, only=refs - set(carry))
        for n in carry:
            if n in refs:
                gen.line(1, f"{gen.read(n)} = {carry[n]}[0]")
        return ctx

    # ---- the module -------------------------------------------------------------------------
    def source(self) -> str | None:
        gen = self.gen
        k = gen.kernel
        segments = self.segments()
        if not self.covered(segments):
            return None
        refs = [referenced(st) for _, st in segments]
        writes = [assigned(st) if kind == "serial" else set() for kind, st in segments]
        carried = carried_locals(refs, writes, list(gen.types))
        carry = {n: f"_c_{gen.local[n]}" for n in carried}
        carry_types = [(carry[n], f"types.Array(types.{NUMBA_TYPE[self.dtype(n).name]}, 1, \"C\")")
                       for n in carried]
        chunk = "_chunk"     # the name compile/pysource.py's per-chunk copies are indexed by
        gen.names.used.add(chunk)
        chunks, phase = gen.names.temp("chunks"), gen.names.temp("phase")
        name = gen.entry
        functions, driver = [], []
        args = [gen.field_names[id(f)] for f in gen.fields] + [gen.local[a.name] for a in k.args]
        if gen.uses_random:
            args.append(gen.seed)
        if gen.bad:
            args.append(gen.bad)
        for n in carried:
            arg = [a for a in k.args if a.name == n]
            init = (f"np.array([{gen.local[n]}], {NP_TYPE[self.dtype(n).name]})" if arg else
                    f"np.zeros(1, {NP_TYPE[self.dtype(n).name]})")
            driver.append(f"    {carry[n]} = {init}  # the local {n}, between segments")
        for i, (kind, stmts) in enumerate(segments):
            gen.lines = []
            gen.last_loc = None
            self.segment_fields = {id(f) for f in ir.fields_of(tuple(stmts))}
            seg = gen.names.take(f"{name}_{i}")
            ctx = self.start(refs[i], carry, index="-1")
            if kind == "serial":
                gen.block(stmts, 1, ctx)
                for n in carried:
                    if n in writes[i]:
                        gen.line(1, f"{carry[n]}[0] = {gen.read(n)}")
                functions += self.function(seg, [], carry_types, f"segment {i}: serial",
                                           gen.lines)
                driver.append(f"    {seg}({', '.join(args + list(carry.values()))})")
                continue
            loop = stmts[0]
            plan = gen.loops[id(loop)]
            extra, calls = self.parallel(seg, loop, plan, chunk, chunks, phase, args, carry)
            leading = [(chunk, "types.int64"), (chunks, "types.int64")]
            if plan.block_span:
                leading.append((phase, "types.int64"))
            functions += self.function(seg, leading, carry_types + extra,
                                       f"segment {i}: one chunk of a parallel loop", gen.lines)
            driver += calls
        out = gen.header()
        out += ["import math", "", "import numpy as np",
                "from numba import float32, float64, int8, int16, int32, int64, njit, types, "
                "uint8, uint16, uint32, uint64",
                "from tinyad.compile import pool as _tinyad_pool"]
        if gen.uses_chunks:
            out += ["", f"_CHUNKS = {_chunk_count()}  # numba's thread count when this was generated"]
        if gen.atomics_used:
            out.append(f"from tinyad.compile.atomics import {', '.join(sorted(gen.atomics_used))}")
        out += gen.serial_loop_imports()
        if gen.uses_print:
            out += ["from numba import objmode", "from tinyad.core.ir import print_text"]
        out += gen.shared_globals(f"@njit(error_model=\"numpy\", {NO_CFUNC})")
        out += functions
        out += ["", "", f"def {name}({', '.join(args)}):",
                '    """Run the segments in order, the parallel ones in chunks on tinyad\'s '
                'thread pool."""', *driver]
        return "\n".join(out) + "\n"

    def dtype(self, name):
        k = self.gen.kernel
        for a in k.args:
            if a.name == name:
                return a.dtype
        return self.gen.types[name]

    def for_range(self, depth, var, lo, hi, loc=None):
        """`for var in range(lo, hi)`, where lo >= 0 (a parallel loop's iterations). The mask
        tells LLVM so: numpy's negative-index check then folds away and the loop vectorizes
        (a range starting at an unknown offset ran 20x slower)."""
        gen = self.gen
        index = gen.names.temp("i")
        gen.line(depth, f"for {index} in range({lo}, {hi}):  # this chunk's iterations", loc)
        gen.line(depth + 1, f"{var} = {index} & 0x7FFFFFFFFFFFFFFF  # >= 0, as LLVM cannot see")

    def parallel(self, seg, loop, plan, chunk, chunks, phase, args, carry):
        """Emit one chunk of a parallel loop into gen.lines: -> (extra parameters, the driver's
        lines that run it)."""
        gen = self.gen
        lo, hi = gen.value(loop.start), gen.value(loop.stop)
        var = gen.local[loop.var]
        inner = Ctx(plan, "_rsp")
        n, base = _count_and_base(lo, hi)
        trip = gen.trip(loop)
        size = sum(1 for _ in ir.walk_stmts(loop.body))
        threaded = gen.parallel_min == 0 or trip is None or trip * size >= MIN_WORK
        run = "_tinyad_pool.run" if threaded else "_tinyad_pool.run_serially"
        call_args = args + list(carry.values())
        ordinal = gen.parallel_ordinal(loop)
        if plan.block_span:
            rows, blocks, mine, block, b = (gen.names.temp(x) for x in
                                            ("rows", "blocks", "mine", "block", "b"))
            gen.uses_chunks = True
            gen.line(1, f"{rows} = max({plan.block_span}, -(-{n} // (2 * _CHUNKS)))"
                        "  # rows per block", loop.loc)
            gen.line(1, f"{blocks} = -(-{n} // {rows})")
            gen.line(1, f"{mine} = ({blocks} - {phase} + 1) // 2  # blocks of this phase")
            gen.line(1, f"for {block} in range({chunk} * {mine} // {chunks}, "
                        f"({chunk} + 1) * {mine} // {chunks}):")
            gen.line(2, f"{b} = 2 * {block} + {phase}")
            self.for_range(2, var, f"{base}{b} * {rows}", f"{base}min(({b} + 1) * {rows}, {n})")
            gen.scope_prologue(id(loop), 3, inner, index=var, stream=ordinal)
            gen.block(loop.body, 3, inner)
            calls = [f"    for _phase in range(2):  # even blocks, then odd ones (a stencil: "
                     f"blocks of one phase are {plan.block_span}+ rows apart)",
                     f"        {run}({seg}, None, _phase, {', '.join(call_args)})"]
            return [], calls
        if not (plan.private or plan.reductions):
            self.for_range(1, var, f"{base}{chunk} * {n} // {chunks}",
                           f"{base}({chunk} + 1) * {n} // {chunks}", loop.loc)
            gen.scope_prologue(id(loop), 2, inner, index=var, stream=ordinal)
            gen.block(loop.body, 2, inner)
            return [], [f"    {run}({seg}, None, {', '.join(call_args)})"]
        # per-chunk sums and field copies: _CHUNKS chunks, added up after the loop in order
        gen.uses_chunks = True
        extra, calls = [], []
        partials = {acc: gen.names.temp(f"{acc[1:]}_chunks") for acc, *_ in plan.reductions}
        for acc, fld, indices, dtype in plan.reductions:
            extra.append((partials[acc], f"types.Array(types.{NUMBA_TYPE[dtype.name]}, 1, \"C\")"))
            calls.append(f"    {partials[acc]} = np.empty(_CHUNKS, {NP_TYPE[dtype.name]})")
            gen.line(1, f"{acc} = {gen.zero(dtype, wrap=False)}")
        for fld, copies in plan.private.values():
            array = gen.field_names[id(fld)]
            extra.append((copies, f"types.Array(types.{NUMBA_TYPE[fld.dtype.name]}, "
                                  f"{ir.array_rank(fld) + 1}, \"C\")"))
            calls.append(f"    {copies} = _tinyad_pool.chunk_copies(\"{copies}\", {array}, "
                         f"_CHUNKS)  # per-chunk copies of {array}")
        self.for_range(1, var, f"{base}{chunk} * {n} // {chunks}",
                       f"{base}({chunk} + 1) * {n} // {chunks}", loop.loc)
        gen.scope_prologue(id(loop), 2, inner, index=var, stream=ordinal)
        gen.block(loop.body, 2, inner)
        for acc in partials:
            gen.line(1, f"{partials[acc]}[{chunk}] = {acc}")
        every = call_args + [name for name, _ in extra]
        calls.append(f"    {run}({seg}, _CHUNKS, {', '.join(every)})")
        for acc, fld, indices, dtype in plan.reductions:
            array = gen.field_names[id(fld)]
            where = ", ".join(str(int(i.value)) for i in indices)
            target = f"{array}[{where}]" if indices else f"{array}[()]"
            calls += ["    for _t in range(_CHUNKS):  # add up the chunks' sums, in order",
                      f"        {target} += {partials[acc]}[_t]"]
        for fld, copies in plan.private.values():
            calls.append(f"    _tinyad_pool.add_copies({gen.field_names[id(fld)]}, {copies})")
        return extra, calls


def generate_pooled(kernel: ir.Kernel, fast_math: bool = True,
                    parallel_min: int | None = None) -> Generated:
    """The pooled module of a kernel with a parallel loop; without one, the serial module, and
    for the cases above the parfors module (compile/pysource.py's, from the same generator)."""
    nested, work = nest_loops(kernel)
    if len(split_gathers(nested, work)[0].body) != len(nested.body):
        # a stencil adjoint split into a scatter and a gather (compile/gather.py): its two
        # loops share scratch buffers the function allocates, one parfors function keeps them
        return generate_cpu(kernel, fast_math=fast_math, parallel_min=parallel_min)
    gen = Generator(nested, "cpu", False,
                    parallel_min_default() if parallel_min is None else parallel_min, fast_math,
                    work)
    source = PooledModule(gen).source() if gen.loops else None
    if source is None:
        source = gen.cpu_module()
    written = sorted({gen.fields.index(s.field) for s in ir.walk_stmts(kernel.body)
                      if isinstance(s, (ir.Store, ir.AtomicOp))})
    return Generated(kernel, "cpu", source, gen.entry, gen.fields,
                     [a.dtype for a in kernel.args], gen.uses_random, kernel.ret,
                     bool(gen.loops), gen.sites, written, bad_slots=gen.bad_slots,
                     launch_bounds=gen.launch_bounds)
