"""tinyad IR -> readable Python source for numba (CPU `njit` or `cuda.jit`).

One generated module per kernel. The CPU module holds one function taking the kernel's field
arrays (one positional parameter each) and its scalar arguments; the CUDA module holds one
`cuda.jit` kernel per segment (below) and a plain Python `launch` that runs them in order.
Every line that comes from the user's code ends with `# file.py:line`.

Semantics follow the interpreter (interp/), the executable spec of the IR:

* Floats keep their precision: f32 constants are module-level `np.float32` constants
  (`_f32_0p5`), ints entering float math are cast explicitly (the IR has the casts).
* Integers are exact: numba computes `int32 + int32` in int64, so an i32 result is wrapped back
  with `int32(...)` wherever its exact value matters (indices, comparisons, division, stores to
  locals). Sums and products may stay wide in between: they are right modulo 2**32.
  `//` and `%` on ints are Python's floor semantics in numba, as in the interpreter (x // 0 = 0).
* A local that may be read before it is assigned gets a zero first (a `save` may run before
  the local's first assignment, in a loop's first iteration).
* save/restore: one stack per local, a numpy array that doubles when full (`push`), allocated
  in the parallel loop's body when all its uses are there (each iteration has its own).
* The outermost parallel loop becomes `prange` when that is safe: no `break` directly in it, no
  local it assigns is used outside it, and (unless forced) enough iterations to pay for threads.
  Otherwise it runs serially, in order, exactly like the interpreter.
* Atomics: plain `+=` in serial code. In a `prange` loop: plain when each iteration owns the
  element (first index = the loop index); a numba reduction (a local accumulator) for adds into
  constant indices (a loss); per-thread copies summed after the loop for scatter-adds into a
  field the loop only adds to and that has fewer elements than the loop makes adds; the
  LLVM `atomicrmw` intrinsics of compile/atomics.py otherwise.
* A parallel loop nest whose shifted scatter-adds (a stencil's adjoint) can be proved apart
  from its other accesses is first split by compile/gather.py: the adds' values into scratch
  buffers the function allocates, then a second loop gathers them (no atomics, vectorized).
* `ti.random()`: a counter-based generator (compile/rt.py), the same streams as interp mode.

Compile time is numba's (about 1 ms per operation), so the code is shaped for it: selects
without loads are `select(c, a, b)` calls (a conditional expression would add basic blocks),
a local that lives in one straight-line stretch of code gets a new name at each assignment
(numba's SSA pass costs statements x reassigned locals), constants are globals (no calls).

Expressions are written by compile/pyexpr.py, loops planned by compile/plan.py, and CUDA
modules (one `cuda.jit` kernel per top-level segment) assembled by compile/cudasource.py.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from tinyad.compile import badindex, rt
from tinyad.compile.cudaloops import CudaLoops
from tinyad.compile.gather import is_scratch, split_gathers
from tinyad.compile.laneloops import SerialLoops
from tinyad.compile.nesting import nest_loops
from tinyad.compile.plan import LoopPlan, Planner
from tinyad.compile.printstmt import PrintStatements
from tinyad.compile.pyexpr import NP_TYPE, NUMBA_TYPE, UNARY, CodegenError, ExprWriter, Names, Site
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.ops import TABLE
from tinyad.core.printer import format_kernel, with_source_comment

STACK_START = 16          # first capacity of a CPU save stack (it doubles when full)
CUDA_STACK = 1024         # capacity of a CUDA save stack (per thread, fixed)
# The smallest static trip count for which a parallel loop gets threads (below, the thread
# pool's wake-up costs more than it saves). TINYAD_PARALLEL_MIN overrides it; 0 = always.
PARALLEL_MIN = 256
# LLVM's fast-math flags for ti.init(fast_math=True), Taichi's default: none. Each one changes
# what some IEEE operation returns, so that a float `==` or a sign test decides otherwise than
# in interp mode and Taichi 1.7.4 (tests/test_fast_math.py): `contract` fused a * b + c into one
# rounding (biaxialFem99's top row held no vertex), `reassoc` reorders sums and products, `arcp`
# makes x / c into x * (1 / c), `nsz` drops a zero's sign; `nnan`/`ninf` let a NaN check or an
# overflow go silently wrong; `afn` turns `x ** float(n)` into llvm.powi, which numba's JIT
# lacks. A flag put here applies to every kernel but those needs_exact_floats keeps exact.
FAST_MATH: frozenset = frozenset()
# The bad-index array's numba type (compile/badindex.py)
BAD_TYPE = 'types.Array(types.int64, 1, "C")'
# numba gives every function a C-callable twin (for first-class function values) unless told
# not to; nothing takes a kernel's address, and the twin cost ~20 ms of compile a function.
NO_CFUNC = "no_cfunc_wrapper=True"
# numba.cuda's atomic's name where it is not the op's (the bitwise ones, on integers)
CUDA_ATOMICS = {"bit_and": "and_", "bit_or": "or_", "bit_xor": "xor"}


def fast_math_option() -> str:
    """numba's `fastmath=` option for FAST_MATH, as source text."""
    return "fastmath={" + ", ".join(f'"{flag}"' for flag in sorted(FAST_MATH)) + "}"


def needs_exact_floats(kernel: ir.Kernel) -> bool:
    """Must this kernel compute floats as IEEE says, not as fast-math allows? An atomic min/max's
    adjoint recomputes the value and gives it the gradient only where it equals the stored winner
    (tinyad/autodiff/reverse.py), so the primal kernel and its adjoint, two functions, must round
    the value the same way; fast-math lets LLVM fuse or reassociate each one differently, and the
    winner lost its gradient (a fuzzer's find). The same holds for any float `==` / `!=` between
    two computed values. Such kernels compile without fast-math."""
    for stmt in ir.walk_stmts(kernel.body):
        if isinstance(stmt, ir.AtomicOp) and stmt.op in ("min", "max") \
                and stmt.field.dtype.is_float:
            return True
        for expr in ir.stmt_exprs(stmt):
            for e in ir.walk_expr(expr):
                if isinstance(e, ir.Op) and e.op in ("eq", "ne") and all(
                        a.dtype.is_float and not isinstance(a, ir.Const) for a in e.args):
                    return True
    return False

@dataclass
class Generated:
    """A generated module and what the launcher needs to call it."""
    kernel: ir.Kernel
    target: str                      # "cpu" or "cuda"
    source: str
    entry: str                       # the function (CPU) or driver (CUDA) to call
    fields: list                     # Field objects, in parameter order
    scalars: list                    # DType of each scalar argument, in order
    uses_random: bool                # one extra int64 seed argument at the end
    ret: T.DType | None
    parallel: bool                   # at least one prange / parallel segment
    sites: list = field(default_factory=list)       # debug bounds-check sites
    written: list = field(default_factory=list)     # indices of fields the kernel writes
    module_name: str = ""            # chosen by the cache
    # CUDA only: the segments' cuda.jit kernels in launch order, and the top-level locals that
    # travel between them in one-element device arrays, as (name, dtype, is a kernel argument)
    segments: list = field(default_factory=list)
    carried: list = field(default_factory=list)
    sets_error: bool = False         # CUDA: a save stack may overflow, setting _err[0]
    # The bad-index flag (compile/badindex.py): the length of the int64 array the kernel takes
    # last (0: none; `sites` are then its guarded accesses), and the check before each launch
    bad_slots: int = 0
    launch_bounds: object = None

    @property
    def ir_text(self) -> str:
        return format_kernel(self.kernel)


@dataclass
class Ctx:
    """Where the statements being emitted are."""
    loop: LoopPlan | None   # the prange loop being emitted, if any
    state: str              # the random stream's local


class Generator(ExprWriter, Planner, CudaLoops, SerialLoops, PrintStatements):
    """IR -> one Python module: the statements, loops and module layout (expressions are
    ExprWriter's, loop planning is Planner's, CUDA's parallel loops CudaLoops')."""

    def __init__(self, kernel: ir.Kernel, target: str, debug: bool, parallel_min: int,
                 fast_math: bool = False, work: dict | None = None):
        self.kernel, self.target, self.debug = kernel, target, debug
        self.work = work or {}          # id(loop) -> iterations of its nest (compile/nesting.py)
        self.fast_math = fast_math and bool(FAST_MATH) and not needs_exact_floats(kernel)
        self.parallel_min = parallel_min
        self.names = Names(target)
        self.entry = self.names.take(kernel.name)      # the function's name: taken first
        self.lines: list[str] = []
        self.last_loc = None
        used = ir.fields_of(kernel.body)
        self.fields = [f for f in used if not is_scratch(f)]       # the parameters
        self.scratch = [f for f in used if is_scratch(f)]          # allocated by the function
        self.field_names = {id(f): self.names.take(f.name) for f in used}
        # parfors cannot index a 0-d array: those are used through a 1-element view
        # (on CUDA the launcher passes them as 1-element arrays)
        self.arrays = {id(f): (self.names.temp(self.field_names[id(f)])
                               if ir.array_rank(f) == 0 and target == "cpu"
                               else self.field_names[id(f)]) for f in used}
        self.types: dict[str, T.DType] = ir.local_types(kernel)
        self.local = {a.name: self.names.take(a.name) for a in kernel.args}
        for name in self.types:
            if name not in self.local:
                self.local[name] = self.names.take(name)
        self.uses_random = any(isinstance(x, ir.Op) and x.op == "random"
                               for s in ir.walk_stmts(kernel.body) for e in ir.stmt_exprs(s)
                               for x in ir.walk_expr(e))
        self.seed = self.names.temp("seed") if self.uses_random else None
        self.helpers: set[str] = set()
        self.constants: dict[str, str] = {}      # float32(...) text -> module constant name
        self.atomics_used: set[str] = set()
        self.start_serial_loops()
        self.sites: list[Site] = []
        self.uses_print = False
        self.random_names: dict[int, str] = {}
        self.loops: dict[int, LoopPlan] = {}          # id(For) -> plan, for parallel loops
        self.plan_parallel()
        self.plan_all_scopes()
        self.prove_indices()
    # ---- output -----------------------------------------------------------------------------
    def line(self, depth: int, text: str, loc=None):
        text = "    " * depth + text
        if loc is not None and loc.line and loc != self.last_loc:
            text = with_source_comment(text, loc, column=64)   # 4-space indents: wider
            self.last_loc = loc
        self.lines.append(text)
    # ---- statements -------------------------------------------------------------------------
    def hoist_random(self, exprs, depth, state, loc):
        """Bind every ti.random() of a statement to a temporary drawn before it."""
        for e in exprs:
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Op) and x.op == "random" and id(x) not in self.random_names:
                    name = self.names.temp("r")
                    self.random_names[id(x)] = name
                    draw = {"f32": "rng_f32", "f64": "rng_f64", "i32": "rng_i32"}.get(
                        x.dtype.name, "rng_int")
                    self.helpers.update(("rng_next", draw, "rng_init"))
                    self.line(depth, f"{state} = rng_next({state})", loc)
                    value = f"{draw}({state})"
                    if x.dtype.name != "i32":
                        value = self.wrap(value, x.dtype)
                    self.line(depth, f"{name} = {value}", loc)

    def block(self, stmts, depth, ctx):
        if not stmts:
            self.line(depth, "pass")
        for s in stmts:
            self.stmt(s, depth, ctx)

    def stmt(self, s, depth, ctx):
        if id(s) in self.checkpoints:
            self.checkpoint(self.checkpoints[id(s)], depth)
        if not isinstance(s, (ir.While,)):
            self.hoist_random(ir.stmt_exprs(s), depth, ctx.state, s.loc)
        kind = type(s)
        if kind is ir.Assign:
            value = self.typed(s.value)
            self.line(depth, f"{self.define(s.name)} = {value}", s.loc)
        elif kind is ir.Store:
            target = self.access(s.field, s.indices, s.loc)
            self.line(depth, f"{target} = {self.store_value(s.value)}", s.loc)
        elif kind is ir.AtomicOp:
            self.atomic(s, depth, ctx)
        elif kind is ir.If:
            self.line(depth, f"if {self.cond(s.cond)}:", s.loc)
            self.block(s.then, depth + 1, ctx)
            if s.orelse:
                self.line(depth, "else:")
                self.block(s.orelse, depth + 1, ctx)
        elif kind is ir.For:
            self.loop(s, depth, ctx)
        elif kind is ir.While:
            self.while_loop(s, depth, ctx)
        elif kind is ir.Break:
            self.line(depth, "break", s.loc)
        elif kind is ir.Return:
            self.ret(s, depth, ctx)
        elif kind is ir.Save:
            self.save(s, depth, ctx)
        elif kind is ir.Restore:
            stack, top = self.stack_names(s.name)
            self.line(depth, f"{top} -= 1", s.loc)
            if self.target == "cuda":
                self.line(depth, f"if {top} < {CUDA_STACK}:")
                self.line(depth + 1, f"{self.define(s.name)} = {stack}[{top}]", s.loc)
            else:
                self.line(depth, f"{self.define(s.name)} = {stack}[{top}]", s.loc)
        elif kind is ir.Print:
            self.print_stmt(s, depth)
        elif kind is ir.Assert:
            self.assert_stmt(s, depth)
        else:  # pragma: no cover  (the IR is a closed set)
            raise CodegenError(f"unknown statement {s!r}")

    def store_value(self, e: ir.Expr) -> str:
        """Stores convert to the element type, so an int right modulo 2**bits is enough."""
        text, _, _ = self.expr(e)
        return text

    def ret(self, s, depth, ctx):
        if self.target == "cuda":
            self.line(depth, f"_ret[0] = {self.typed(s.value)}", s.loc)
            return
        self.line(depth, f"return {self.typed(s.value)}", s.loc)

    def stack_names(self, name):
        base = self.local[name]
        return f"_st_{base}", f"_sp_{base}"

    def save(self, s, depth, ctx):
        stack, top = self.stack_names(s.name)
        if self.target == "cuda":
            self.line(depth, f"if {top} < {CUDA_STACK}:", s.loc)
            self.line(depth + 1, f"{stack}[{top}] = {self.read(s.name)}")
            self.line(depth, "else:")
            self.line(depth + 1, "_err[0] = 1  # save stack overflow")
            self.line(depth, f"{top} += 1")
            return
        self.helpers.add("push")
        self.line(depth, f"{stack} = push({stack}, {top}, {self.read(s.name)})", s.loc)
        self.line(depth, f"{top} += 1")

    def atomic(self, s: ir.AtomicOp, depth, ctx):
        how = "plain"
        if ctx.loop is not None:
            how = ctx.loop.atomics.get(id(s), "atomic")
        if how == "plain" and self.promoted_atomic(s, depth):     # compile/accumulators.py
            return
        value = self.store_value(s.value)
        if how not in ("plain", "atomic", "private"):   # a prange reduction into a local
            sign = "-" if s.op == "sub" else ""
            operand = self.operand(s.value, UNARY) if sign else self.value(s.value)
            self.line(depth, f"{how} += {sign}{operand}", s.loc)
            return
        if how == "atomic":
            self.atomic_call(s, depth, ctx)
            return
        if how == "private":
            copies = ctx.loop.private[id(s.field)][1]
            guarded = self.guarded_index(s.field, s.indices, s.loc)
            if guarded is None:
                index = ", ".join(["_chunk", *(self.value(i) for i in s.indices)])
            else:
                index = f"(_chunk,) + {guarded}" if len(s.indices) > 1 else f"_chunk, {guarded}"
            sign = "+" if s.op == "add" else "-"
            self.line(depth, f"{copies}[{index}] {sign}= {value}", s.loc)
            return
        target = self.access(s.field, s.indices, s.loc)
        if s.op in ("min", "max") or s.result:
            tmp = self.names.temp("v")
            self.line(depth, f"{tmp} = {self.value(s.value)}", s.loc)
            value = tmp
        result = self.define(s.result) if s.result else None
        if result:
            self.line(depth, f"{result} = {target}", s.loc)
        if s.op in ("add", "sub"):
            self.line(depth, f"{target} {'+' if s.op == 'add' else '-'}= {value}", s.loc)
        elif s.op in ir.BITWISE_ATOMICS:
            self.line(depth, f"{target} {TABLE[s.op].infix}= {value}", s.loc)
        elif s.field.dtype.is_int:
            self.line(depth, f"{target} = {s.op}({target}, {value})", s.loc)
        elif self.target == "cuda":     # a NaN dropped, as by the op (core/ops.py)
            suffix = "f" if s.field.dtype == T.f32 else ""
            self.line(depth, f"{target} = libdevice.f{s.op}{suffix}({target}, {value})", s.loc)
        else:
            self.line(depth, f"{target} = np.f{s.op}({target}, {value})", s.loc)

    def atomic_call(self, s: ir.AtomicOp, depth, ctx):
        array = self.arrays[id(s.field)]
        index = self.guarded_index(s.field, s.indices, s.loc) or self.atomic_index(s.indices)
        value = self.value(s.value)
        if s.field.dtype.is_int:
            value = self.wrap(value, s.field.dtype)
        if self.target == "cuda":
            op = CUDA_ATOMICS.get(s.op, s.op)
            if s.op in ("min", "max") and s.field.dtype.is_float:
                op = f"nan{s.op}"          # a NaN dropped, as by the op (core/ops.py)
            call = f"cuda.atomic.{op}({array}, {index}, {value})"
        else:
            fn = f"atomic_{s.op}"
            self.atomics_used.add(fn)
            call = f"{fn}({array}, {index}, {value})"
        if s.result:
            call = f"{self.define(s.result)} = {call}"
        self.line(depth, call, s.loc)

    def bounds(self, s: ir.For):
        lo, hi = self.value(s.start), self.value(s.stop)
        if s.reverse:
            lo_m1 = str(int(s.start.value) - 1) if isinstance(s.start, ir.Const) else f"{lo} - 1"
            hi_m1 = str(int(s.stop.value) - 1) if isinstance(s.stop, ir.Const) else f"{hi} - 1"
            return f"range({hi_m1}, {lo_m1}, -1)"
        return f"range({hi})" if lo == "0" else f"range({lo}, {hi})"

    def loop(self, s: ir.For, depth, ctx):
        plan = self.loops.get(id(s))
        if plan is None or ctx.loop is not None:
            self.serial_loop(s, depth, ctx)     # compile/laneloops.py
            return
        self.parallel_loop(s, plan, depth, ctx)

    def plain_loop(self, s: ir.For, depth, ctx):
        self.line(depth, f"for {self.local[s.var]} in {self.bounds(s)}:", s.loc)
        if s.parallel and ctx.state != "_rsp" and self.uses_random:
            # run serially here, but each iteration still draws from its own stream, as
            # when it runs in parallel (and as in interp mode)
            ctx = Ctx(None, "_rsp")
            self.helpers.add("rng_init")
            self.line(depth + 1, f"{ctx.state} = rng_init({self.seed} + "
                                 f"{self.parallel_ordinal(s)}, {self.local[s.var]})")
        self.block(s.body, depth + 1, ctx)

    def parallel_loop(self, s, plan, depth, ctx):
        lo, hi = self.value(s.start), self.value(s.stop)
        var = self.local[s.var]
        inner = Ctx(plan, "_rsp")
        if self.target == "cuda":
            self.grid_stride_loop(s, plan, depth, lo, hi, var, inner)
            return
        if plan.block_span:
            self.blocked_loop(s, plan, depth, lo, hi, var, inner)
            return
        elif not (plan.private or plan.reductions):
            rng = f"prange({hi})" if lo == "0" else f"prange({lo}, {hi})"
            self.line(depth, f"for {var} in {rng}:  # parallel", s.loc)
        else:
            self.chunked_loop(s, plan, depth, lo, hi, var, inner)
            return
        self.scope_prologue(id(s), depth + 1, inner, index=var, stream=self.parallel_ordinal(s))
        self.block(s.body, depth + 1, inner)

    def blocked_loop(self, s, plan, depth, lo, hi, var, inner):
        """A stencil's scatter-adds without atomics: the range is cut into blocks of at least
        `block_span` rows; even blocks run in parallel, then odd ones. Two blocks running at
        once are a whole block apart, farther than any two rows that touch one element."""
        n, start = _count_and_base(lo, hi)
        rows, blocks, phase, block, b = (self.names.temp(x) for x in
                                         ("rows", "blocks", "phase", "block", "b"))
        self.line(depth, f"{rows} = max({plan.block_span}, -(-{n} // (2 * _CHUNKS)))"
                         "  # rows per block", s.loc)
        self.line(depth, f"{blocks} = -(-{n} // {rows})")
        self.line(depth, f"for {phase} in range(2):  # even blocks, then odd blocks")
        self.line(depth + 1, f"for {block} in prange(({blocks} - {phase} + 1) // 2):  # parallel")
        self.line(depth + 2, f"{b} = 2 * {block} + {phase}")
        self.line(depth + 2, f"for {var} in range({start}{b} * {rows}, "
                             f"{start}min(({b} + 1) * {rows}, {n})):")
        self.uses_chunks = True
        self.scope_prologue(id(s), depth + 3, inner, index=var, stream=self.parallel_ordinal(s))
        self.block(s.body, depth + 3, inner)

    def chunked_loop(self, s, plan, depth, lo, hi, var, inner):
        """One chunk of the range per thread, each adding into its own accumulators and field
        copies, summed after the loop in chunk order (deterministic). No numba reduction
        variables (their analysis copies the loop body per variable: slow to compile) and no
        thread id (numba.get_thread_id() would make the kernel uncacheable)."""
        self.uses_chunks = True
        partials = {acc: self.names.temp(f"{acc[1:]}_chunks") for acc, *_ in plan.reductions}
        for acc, fld, indices, dtype in plan.reductions:
            self.line(depth, f"{partials[acc]} = np.empty(_CHUNKS, {NP_TYPE[dtype.name]})",
                      s.loc)
        for fld, copies in plan.private.values():
            array = self.arrays[id(fld)]
            self.line(depth, f"{copies} = np.zeros((_CHUNKS,) + {array}.shape, "
                             f"{NP_TYPE[fld.dtype.name]})  # per-chunk copies of {array}")
        n, start = _count_and_base(lo, hi)
        self.line(depth, "for _chunk in prange(_CHUNKS):  # parallel, one chunk per thread", s.loc)
        for acc, fld, indices, dtype in plan.reductions:
            self.line(depth + 1, f"{acc} = {self.zero(dtype, wrap=False)}")
        self.line(depth + 1, f"for {var} in range({start}_chunk * {n} // _CHUNKS, "
                             f"{start}(_chunk + 1) * {n} // _CHUNKS):")
        self.scope_prologue(id(s), depth + 2, inner, index=var, stream=self.parallel_ordinal(s))
        self.block(s.body, depth + 2, inner)
        for acc in partials:
            self.line(depth + 1, f"{partials[acc]}[_chunk] = {acc}")
        t = self.names.temp("t")
        for acc, fld, indices, dtype in plan.reductions:
            target = self.access(fld, indices, s.loc)
            self.line(depth, f"for {t} in range(_CHUNKS):  # add up the chunks' sums")
            self.line(depth + 1, f"{target} += {partials[acc]}[{t}]", s.loc)
        # Copies of fields of one size are added up in one parallel pass (a tangent kernel's
        # field and its dual: one fork-join, not two)
        by_size: dict = {}
        for fld, copies in plan.private.values():
            by_size.setdefault(ir.array_size(fld), []).append((fld, copies))
        for group in by_size.values():
            k = self.names.temp("k")
            pairs = []
            for fld, copies in group:
                flat, rows = self.names.temp("flat"), self.names.temp("rows")
                self.line(depth, f"{flat} = {self.arrays[id(fld)]}.reshape(-1)"
                                 "  # add up the per-chunk copies")
                self.line(depth, f"{rows} = {copies}.reshape(_CHUNKS, -1)")
                pairs.append((flat, rows))
            self.line(depth, f"for {k} in prange({pairs[0][0]}.shape[0]):")
            for flat, rows in pairs:
                total = self.names.temp("sum")
                self.line(depth + 1, f"{total} = {flat}[{k}]")
                self.line(depth + 1, f"for {t} in range(_CHUNKS):")
                self.line(depth + 2, f"{total} += {rows}[{t}, {k}]")
                self.line(depth + 1, f"{flat}[{k}] = {total}")

    def while_loop(self, s: ir.While, depth, ctx):
        has_random = any(isinstance(x, ir.Op) and x.op == "random" for x in ir.walk_expr(s.cond))
        if not has_random:
            self.line(depth, f"while {self.cond(s.cond)}:", s.loc)
            self.block(s.body, depth + 1, ctx)
            return
        self.line(depth, "while True:", s.loc)
        self.hoist_random((s.cond,), depth + 1, ctx.state, s.loc)
        self.line(depth + 1, f"if not ({self.cond(s.cond)}):")
        self.line(depth + 2, "break")
        self.block(s.body, depth + 1, ctx)
        for x in ir.walk_expr(s.cond):     # drawn afresh on every test of the condition
            self.random_names.pop(id(x), None)

    def parallel_ordinal(self, loop: ir.For) -> int:
        """k for the kernel's k-th parallel loop in source order (1, 2, ...), whether or not it
        runs in parallel here: its iterations draw ti.random() from streams seed + k."""
        if not hasattr(self, "_ordinals"):
            self._ordinals = {id(s): k for k, s in enumerate(_outer_parallel_loops(
                self.kernel.body), 1)}
        return self._ordinals[id(loop)]

    def scope_prologue(self, scope, depth, ctx, index, stream=0, only=None):
        """Initial values of the scope's locals, its save stacks and its random stream."""
        for name in self.types:        # in order of first assignment: deterministic source
            if (self.init_scope.get(name, -1) == scope and name in self.needs_init
                    and (only is None or name in only)):
                dtype = self.types[name]
                zero = self.zero(dtype, wrap=True)
                self.line(depth, f"{self.local[name]} = {zero}")
        for name in self.types:
            if (name in self.stack_scope and self.stack_scope[name] == scope
                    and (only is None or name in only)):
                stack, top = self.stack_names(name)
                self.line(depth, f"{stack} = {self.stack_alloc(name)}")
                self.line(depth, f"{top} = 0")
        if self.uses_random:
            self.helpers.add("rng_init")
            seed = f"{self.seed} + {stream}" if stream else self.seed
            self.line(depth, f"{ctx.state} = rng_init({seed}, {index})")

    def zero(self, dtype: T.DType, wrap: bool) -> str:
        if dtype == T.f32:
            return self.f32_constant(0.0)
        if dtype.is_float:
            return "0.0"
        return self.wrap("0", dtype) if wrap else "0"

    def stack_alloc(self, name):
        if self.target == "cuda":
            return f"cuda.local.array({CUDA_STACK}, {NUMBA_TYPE[self.types[name].name]})"
        return f"np.empty({STACK_START}, {NP_TYPE[self.types[name].name]})"

    # ---- the module -------------------------------------------------------------------------
    def signature(self) -> str:
        parts = [f"types.Array(types.{NUMBA_TYPE[f.dtype.name]}, {ir.array_rank(f)}, \"C\")"
                 for f in self.fields]
        parts += [f"types.{NUMBA_TYPE[a.dtype.name]}" for a in self.kernel.args]
        if self.uses_random:
            parts.append("types.int64")
        if self.bad:
            parts.append(BAD_TYPE)
        ret = f"types.{NUMBA_TYPE[self.kernel.ret.name]}" if self.kernel.ret else "types.none"
        return f"{ret}(\n    " + ",\n    ".join(parts) + ",\n)" if parts else f"{ret}()"

    def params(self) -> list[str]:
        params = [self.field_names[id(f)] for f in self.fields]
        params += [self.local[a.name] for a in self.kernel.args]
        if self.uses_random:
            params.append(self.seed)
        if self.bad:
            params.append(self.bad)
        return params

    def header(self) -> list[str]:
        k = self.kernel
        where = f" ({os.path.basename(k.loc.file)}:{k.loc.line})" if k.loc.line else ""
        return [f'"""tinyad kernel {k.name}{where}: generated code ({self.target}), do not edit.',
                "",
                "Parameters:"] + [
                f"    {self.field_names[id(f)]}: field {f.name}, {f.dtype} "
                f"{tuple(f.shape)}{' x ' + str(f.element_shape) if f.element_shape else ''}"
                for f in self.fields] + [
                f"    {self.local[a.name]}: {a.dtype}" for a in k.args] + (
                [f"    {self.seed}: the launch's random seed"] if self.uses_random else []) + (
                [f"    {self.bad}: where the first bad index is recorded (compile/badindex.py)"]
                if self.bad else []) + [
                "", "The kernel's IR:", "", *format_kernel(k).splitlines(), '"""']

    def shared_globals(self, helper_decorator: str) -> list[str]:
        """The module's f32 constants and the runtime helpers its code calls."""
        out = []
        if self.constants:
            out += [""] + [f"{name} = np.{text}" for text, name in self.constants.items()]
        if self.helpers & set(rt.RANDOM):
            out.append(f"from tinyad.compile.rt import {', '.join(rt.CONSTANTS)}")
        if self.helpers:
            out += ["", "", rt.helper_source(self.helpers, helper_decorator)]
        if self.guard_ranks or self.record_ranks:
            out += ["", "", badindex.guard_source(self.guard_ranks, self.target,
                                                  helper_decorator, self.record_ranks)]
        return out

    def cpu_module(self) -> str:
        self.lines = []
        body_start = len(self.lines)
        top = Ctx(None, "_rs")
        for f in self.fields:
            if ir.array_rank(f) == 0:
                self.line(1, f"{self.arrays[id(f)]} = one_element({self.field_names[id(f)]})"
                          "  # a 0-d field as 1 element")
        for f in self.scratch:
            at = [self.names.temp("z") for _ in f.shape]
            for text in f.allocation(self.arrays[id(f)], NP_TYPE[f.dtype.name], at):
                self.line(1, text)
        self.scope_prologue(None, 1, top, index="-1")
        self.block(self.kernel.body, 1, top)
        body = self.lines[body_start:]
        parallel = bool(self.loops)
        # numba cannot reload an object-mode block (print) in a parallel loop from its cache
        # ("missing Environment"): such kernels compile in each process.
        options = ["error_model=\"numpy\"", f"cache={not self.uses_print}", NO_CFUNC]
        if parallel:
            options.insert(0, "parallel=True")
        if self.debug:
            options.append("boundscheck=True")
        if self.fast_math:
            options.append(fast_math_option())
        out = self.header()
        out += ["import math", "", "import numpy as np",
                "from numba import float32, float64, int8, int16, int32, int64, njit, prange, "
                "types, uint8, uint16, uint32, uint64"]
        if self.uses_chunks:
            out += ["", f"_CHUNKS = {chunks()}  # numba's thread count when this was generated"]
        if self.atomics_used:
            out.append(f"from tinyad.compile.atomics import {', '.join(sorted(self.atomics_used))}")
        out += self.serial_loop_imports()
        if self.uses_print:
            out += ["from numba import objmode", "from tinyad.core.ir import print_text"]
        out += self.shared_globals(f"@njit(error_model=\"numpy\", {NO_CFUNC})")
        name = self.entry
        out += ["", "", f"@njit({self.signature()}, {', '.join(options)})",
                f"def {name}({', '.join(self.params())}):"]
        out += body
        return "\n".join(out) + "\n"


def _count_and_base(lo: str, hi: str) -> tuple[str, str]:
    """A range's length and the prefix that offsets an index into it, as source text."""
    return (hi, "") if lo == "0" else (f"({hi} - {lo})", f"{lo} + ")


def chunks() -> int:
    """How many chunks a loop with per-thread copies is cut into: numba's thread count."""
    from numba import config  # noqa: PLC0415
    return max(int(config.NUMBA_NUM_THREADS), 1)


def parallel_min_default() -> int:
    value = os.environ.get("TINYAD_PARALLEL_MIN")
    return int(value) if value not in (None, "") else PARALLEL_MIN


def generate_cpu(kernel: ir.Kernel, debug: bool = False, fast_math: bool = True,
                 parallel_min: int | None = None) -> Generated:
    nested, work = nest_loops(kernel)
    if not debug:           # debug mode reports the user's own out-of-bounds accesses
        nested, work = split_gathers(nested, work)
    gen = Generator(nested, "cpu", debug,
                    parallel_min_default() if parallel_min is None else parallel_min, fast_math,
                    work)
    source = gen.cpu_module()
    written = sorted({gen.fields.index(s.field) for s in ir.walk_stmts(kernel.body)
                      if isinstance(s, (ir.Store, ir.AtomicOp))})
    return Generated(kernel, "cpu", source, gen.entry, gen.fields,
                     [a.dtype for a in kernel.args], gen.uses_random, kernel.ret,
                     bool(gen.loops), gen.sites, written, bad_slots=gen.bad_slots,
                     launch_bounds=gen.launch_bounds)


def _outer_parallel_loops(block):
    """The parallel loops not inside another one (a struct-for's inner loops are parallel too)."""
    for s in block:
        if isinstance(s, ir.For) and s.parallel:
            yield s
        else:
            for child in ir.child_blocks(s):
                yield from _outer_parallel_loops(child)
