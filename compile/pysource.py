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
  field the loop only adds to and that has fewer elements than the loop has iterations; the
  LLVM `atomicrmw` intrinsics of compile/atomics.py otherwise.
* `ti.random()`: a counter-based generator (compile/rt.py); streams differ from interp mode.

Compile time is numba's (about 1 ms per operation), so the code is shaped for it: selects
without loads are `select(c, a, b)` calls (a conditional expression would add basic blocks),
a local that lives in one straight-line stretch of code gets a new name at each assignment
(numba's SSA pass costs statements x reassigned locals), constants are globals (no calls).

CUDA: the kernel's top level is cut into segments: each parallel loop is one `cuda.jit` kernel
with a grid-stride loop; the statements between them run in a one-thread kernel. Top-level
locals that one segment assigns and a later one reads travel through one-element device arrays.
"""
from __future__ import annotations

import builtins
import keyword
import os
import re
from dataclasses import dataclass, field

import numpy as np

from tinyad import ir
from tinyad import types as T
from tinyad.printer import format_kernel

from compile import rt

NUMBA_TYPE = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "u8": "uint8"}
NP_TYPE = {"f32": "np.float32", "f64": "np.float64", "i32": "np.int32", "i64": "np.int64",
           "u8": "np.uint8"}

# The smallest static trip count for which a parallel loop gets threads (below, the thread
# pool's wake-up costs more than it saves). TINYAD_PARALLEL_MIN overrides it; 0 = always.
PARALLEL_MIN = 256
PRIVATE_BYTES = 16 << 20  # the largest field a parallel loop gives per-thread copies of
STACK_START = 16          # first capacity of a CPU save stack (it doubles when full)
CUDA_STACK = 1024         # capacity of a CUDA save stack (per thread, fixed)

# Python operator precedence (higher binds tighter).
ATOM, POW, UNARY, MUL, ADD, SHIFT, BAND, BXOR, BOR, CMP, NOT, AND, OR = (
    100, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4)
BINARY = {"add": ("+", ADD), "sub": ("-", ADD), "mul": ("*", MUL), "truediv": ("/", MUL),
          "floordiv": ("//", MUL), "mod": ("%", MUL), "bit_and": ("&", BAND),
          "bit_or": ("|", BOR), "bit_xor": ("^", BXOR), "shl": ("<<", SHIFT),
          "shr": (">>", SHIFT)}
COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
MATH = {"sin": "math.sin", "cos": "math.cos", "tan": "math.tan", "asin": "math.asin",
        "acos": "math.acos", "atan": "math.atan", "tanh": "math.tanh", "exp": "math.exp",
        "log": "math.log", "sqrt": "math.sqrt", "atan2": "math.atan2"}
# Integer ops whose result, computed wide, is still right modulo 2**bits ("ring" ops).
RING = {"add", "sub", "mul", "neg", "bit_and", "bit_or", "bit_xor", "bit_not", "shl"}

RESERVED = (set(keyword.kwlist) | set(dir(builtins))
            | {"np", "math", "numba", "njit", "prange", "cuda", "types", "float32", "float64",
               "int32", "int64", "uint8", "uint64", "launch"} | set(rt.HELPERS)
            | set(rt.CONSTANTS))


class CodegenError(Exception):
    """The IR uses something the generator does not handle: a tinyad bug."""


@dataclass
class Site:
    """A field access that debug mode checks: which field, which parameter, where."""
    field: object
    loc: object


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

    @property
    def ir_text(self) -> str:
        return format_kernel(self.kernel)


def sanitize(name: str) -> str:
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit():
        text = "v" + text
    return text


class _Names:
    def __init__(self):
        self.used = set(RESERVED)

    def take(self, preferred: str) -> str:
        base = sanitize(preferred)
        if base.startswith("_"):
            base = "v" + base
        name, k = base, 2
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def temp(self, base: str) -> str:
        name, k = f"_{base}", 1
        while name in self.used:
            name, k = f"_{base}{k}", k + 1
        self.used.add(name)
        return name


# ---- IR analysis ------------------------------------------------------------------------------

def _assigned(stmts) -> set:
    """Locals a block writes: assignments, loop variables, atomic results, restores."""
    names = set()
    for s in ir.walk_stmts(stmts):
        if isinstance(s, (ir.Assign, ir.Restore)):
            names.add(s.name)
        elif isinstance(s, ir.For):
            names.add(s.var)
        elif isinstance(s, ir.AtomicOp) and s.result:
            names.add(s.result)
    return names


def _referenced(stmts) -> set:
    names = _assigned(stmts)
    for s in ir.walk_stmts(stmts):
        if isinstance(s, ir.Save):
            names.add(s.name)
        for e in ir.stmt_exprs(s):
            names.update(x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var))
    return names


def _direct_break(stmts) -> bool:
    """A `break` that would leave this loop (not one inside an inner loop)."""
    for s in stmts:
        if isinstance(s, ir.Break):
            return True
        if isinstance(s, ir.If) and (_direct_break(s.then) or _direct_break(s.orelse)):
            return True
    return False


def _without(stmts, skip):
    """`stmts` with the statement `skip` (found anywhere inside) left out."""
    out = []
    for s in stmts:
        if s is skip:
            continue
        if isinstance(s, ir.If):
            s = ir.If(s.cond, tuple(_without(s.then, skip)), tuple(_without(s.orelse, skip)),
                      s.loc)
        elif isinstance(s, ir.For):
            s = ir.For(s.var, s.start, s.stop, tuple(_without(s.body, skip)), s.parallel,
                       s.reverse, s.loc)
        elif isinstance(s, ir.While):
            s = ir.While(s.cond, tuple(_without(s.body, skip)), s.loc)
        out.append(s)
    return out


def _accesses(stmts):
    """(field, indices, statement-or-load) for every global access in a block."""
    out = []
    for s in ir.walk_stmts(stmts):
        if isinstance(s, (ir.Store, ir.AtomicOp)):
            out.append((s.field, s.indices, s))
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Load):
                    out.append((x.field, x.indices, x))
    return out


def _reads(stmt) -> set:
    names = {x.name for e in ir.stmt_exprs(stmt) for x in ir.walk_expr(e) if isinstance(x, ir.Var)}
    if isinstance(stmt, ir.Save):
        names.add(stmt.name)
    return names


def _maybe_unassigned(stmts, assigned: set) -> set:
    """Locals a block may read before certainly assigning them: they need a first value.
    Assignments in straight-line code count; those inside a branch or loop do not."""
    assigned, risky = set(assigned), set()
    for s in stmts:
        risky |= _reads(s) - assigned
        if isinstance(s, ir.If):
            risky |= _maybe_unassigned(s.then, assigned) | _maybe_unassigned(s.orelse, assigned)
        elif isinstance(s, ir.For):
            risky |= _maybe_unassigned(s.body, assigned | {s.var})
        elif isinstance(s, ir.While):
            risky |= _maybe_unassigned(s.body, assigned)
        elif isinstance(s, (ir.Assign, ir.Restore)):
            assigned.add(s.name)
        elif isinstance(s, ir.AtomicOp) and s.result:
            assigned.add(s.result)
    return risky


def _region_locals(body, args: set) -> set:
    """Locals that live in one straight-line run of statements (no branch or loop in between)
    and are assigned before they are read there. The generator gives each of their assignments
    its own Python name: numba's SSA pass costs (statements x locals assigned more than once),
    which dominates the compile of long adjoint kernels."""
    runs: dict[str, set] = {}
    first_is_def: dict[str, bool] = {}
    counter = iter(range(1 << 62))

    def note(name, run, is_def):
        runs.setdefault(name, set()).add(run)
        first_is_def.setdefault(name, is_def)

    def visit(block):
        run = next(counter)
        for s in block:
            if isinstance(s, (ir.If, ir.For, ir.While)):
                for name in _reads(s):
                    note(name, -1, False)
                if isinstance(s, ir.For):
                    note(s.var, -1, True)
                for inner in ir.child_blocks(s):
                    visit(inner)
                run = next(counter)
                continue
            for name in _reads(s):
                note(name, run, False)
            if isinstance(s, (ir.Assign, ir.Restore)):
                note(s.name, run, True)
            elif isinstance(s, ir.AtomicOp) and s.result:
                note(s.result, run, True)

    visit(body)
    return {n for n, r in runs.items()
            if len(r) == 1 and -1 not in r and first_is_def[n] and n not in args}


def _static_trip(loop: ir.For):
    if isinstance(loop.start, ir.Const) and isinstance(loop.stop, ir.Const):
        return max(0, int(loop.stop.value) - int(loop.start.value))
    return None


def _float_literal(value, dtype: T.DType) -> str:
    """A float constant that numba types as `dtype` and rounds to exactly the IR's value."""
    v = dtype.np(value)
    if np.isnan(v):
        text = "np.nan"
    elif np.isinf(v):
        text = "np.inf" if v > 0 else "-np.inf"
    else:
        text = str(v) if dtype == T.f32 else repr(float(v))
        if dtype == T.f32 and np.float32(float(text)) != v:   # double rounding: be exact
            text = repr(float(v))
        if not any(c in text for c in ".e"):
            text += ".0"
    if dtype == T.f32:
        return f"float32({text})"
    return text if not text.startswith("-") else f"({text})"


# ---- the generator ----------------------------------------------------------------------------

@dataclass
class _Loop:
    """How one parallel IR loop is emitted."""
    stmt: ir.For
    atomics: dict = field(default_factory=dict)      # id(AtomicOp) -> "plain"|"atomic"|acc name
    reductions: list = field(default_factory=list)   # (acc name, field, indices, dtype)
    private: dict = field(default_factory=dict)      # id(field) -> (field, per-thread copies)
    ordinal: int = 0                                 # 1, 2, ...: its random streams' key


class _Generator:
    def __init__(self, kernel: ir.Kernel, target: str, debug: bool, parallel_min: int):
        self.kernel, self.target, self.debug = kernel, target, debug
        self.parallel_min = parallel_min
        self.names = _Names()
        self.entry = self.names.take(kernel.name)      # the function's name: taken first
        self.lines: list[str] = []
        self.last_loc = None
        self.fields = ir.fields_of(kernel.body)
        self.field_names = {id(f): self.names.take(f.name) for f in self.fields}
        # parfors cannot index a 0-d array: those are used through a 1-element view
        # (on CUDA the launcher passes them as 1-element arrays)
        self.arrays = {id(f): (self.names.temp(self.field_names[id(f)])
                               if f.data.ndim == 0 and target == "cpu"
                               else self.field_names[id(f)]) for f in self.fields}
        self.types: dict[str, T.DType] = {a.name: a.dtype for a in kernel.args}
        for s in ir.walk_stmts(kernel.body):
            if isinstance(s, ir.Assign):
                self.types[s.name] = s.value.dtype
            elif isinstance(s, ir.For):
                self.types[s.var] = T.i32
            elif isinstance(s, ir.AtomicOp) and s.result:
                self.types[s.result] = s.field.dtype
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
        self.sites: list[Site] = []
        self.random_names: dict[int, str] = {}
        self.loops: dict[int, _Loop] = {}          # id(For) -> plan, for parallel loops
        self.plan_parallel()
        self.plan_all_scopes()

    def plan_all_scopes(self):
        kernel = self.kernel
        self.stack_scope = self.plan_scopes({s.name for s in ir.walk_stmts(kernel.body)
                                             if isinstance(s, (ir.Save, ir.Restore))},
                                            saves_only=True)
        self.init_scope = self.plan_scopes(set(self.types) - {a.name for a in kernel.args},
                                           saves_only=False)
        self.needs_init = _maybe_unassigned(kernel.body, {a.name for a in kernel.args})
        self.versioned = _region_locals(kernel.body, {a.name for a in kernel.args})
        self.current: dict[str, str] = {}     # versioned local -> its Python name now
        self.uses_chunks = False

    # ---- planning -------------------------------------------------------------------------
    def plan_parallel(self):
        body = self.kernel.body
        args = {a.name for a in self.kernel.args}
        for s in body:
            if not (isinstance(s, ir.For) and s.parallel):
                continue
            if self.debug and self.target == "cpu":    # numba checks bounds only serially
                continue
            if _direct_break(s.body):
                continue
            inside = _assigned((s,))
            outside = _referenced(_without(body, s)) | args
            if inside & outside:
                continue
            trip = _static_trip(s)
            if self.target == "cpu" and trip is not None and trip < max(self.parallel_min, 2):
                continue
            self.loops[id(s)] = self.plan_atomics(s)
            self.loops[id(s)].ordinal = len(self.loops)

    def plan_atomics(self, loop: ir.For) -> _Loop:
        plan = _Loop(loop)
        by_field: dict[int, list] = {}
        for f, indices, node in _accesses(loop.body):
            by_field.setdefault(id(f), []).append((indices, node))
        loop_var_free = loop.var not in _assigned(loop.body)
        for s in ir.walk_stmts(loop.body):
            if not isinstance(s, ir.AtomicOp):
                continue
            uses = by_field[id(s.field)]
            if loop_var_free and all(ix and isinstance(ix[0], ir.Var) and ix[0].name == loop.var
                                     for ix, _ in uses):
                plan.atomics[id(s)] = "plain"     # each iteration owns its elements
            elif self.target == "cpu" and self.privatize(loop, s.field, uses):
                if id(s.field) not in plan.private:
                    plan.private[id(s.field)] = (
                        s.field, self.names.temp(f"p_{self.field_names[id(s.field)]}"))
                plan.atomics[id(s)] = "private"
            elif (self.target == "cpu" and all(
                    isinstance(n, ir.AtomicOp) and n.op in ("add", "sub") and not n.result
                    and all(isinstance(i, ir.Const) for i in ix) for ix, n in uses)):
                # one accumulator per statement: numba's reduction detection accepts a
                # single update of each reduction variable per iteration
                acc = self.names.temp("acc")
                plan.reductions.append((acc, s.field, s.indices, s.field.dtype))
                plan.atomics[id(s)] = acc
            else:
                plan.atomics[id(s)] = "atomic"
        return plan

    def privatize(self, loop, fld, uses) -> bool:
        """Scatter-adds into a field the loop only adds to, with more iterations than the field
        has elements: each thread adds into its own copy, summed after the loop (on a few
        cores this beats atomics 2-4 times: notes/numba.md section 2)."""
        if not all(isinstance(n, ir.AtomicOp) and n.op in ("add", "sub") and not n.result
                   for _, n in uses):
            return False
        if all(isinstance(i, ir.Const) for ix, _ in uses for i in ix):
            return False                    # constant indices: a reduction is better
        trip = _static_trip(loop)
        return trip is not None and fld.data.size <= trip and fld.data.nbytes <= PRIVATE_BYTES

    def plan_scopes(self, names: set, saves_only: bool) -> dict:
        """name -> id(parallel loop) whose body is its only user, or None (the kernel's top)."""
        scope = {name: None for name in names}
        for key, plan in self.loops.items():
            loop = plan.stmt
            inside = _referenced(loop.body)
            outside = _referenced(_without(self.kernel.body, loop))
            for name in names:
                if name in inside and name not in outside and name != loop.var:
                    scope[name] = key
        if not saves_only:
            for plan in self.loops.values():
                scope.pop(plan.stmt.var, None)        # prange binds it itself
        return scope

    # ---- output -----------------------------------------------------------------------------
    def line(self, depth: int, text: str, loc=None):
        text = "    " * depth + text
        if loc is not None and loc.line and loc != self.last_loc:
            text = f"{text.ljust(64)}  # {os.path.basename(loc.file)}:{loc.line}"
            self.last_loc = loc
        self.lines.append(text)

    # ---- expressions ------------------------------------------------------------------------
    def read(self, name: str) -> str:
        return self.current.get(name) or self.local[name]

    def define(self, name: str) -> str:
        """The Python name an assignment to `name` writes: a fresh one for each assignment
        of a versioned local after its first."""
        if name not in self.versioned:
            return self.local[name]
        version = self.local[name] if name not in self.current else self.names.take(
            f"{self.local[name]}_v")
        self.current[name] = version
        return version

    def wrap(self, text: str, dtype: T.DType) -> str:
        return f"{NUMBA_TYPE[dtype.name]}({text})"

    def value(self, e: ir.Expr) -> str:
        """The exact value of `e`, with numba type e.dtype for floats (any int type for ints)."""
        text, prec, exact = self.expr(e)
        if not exact:
            return self.wrap(text, e.dtype)
        return text

    def operand(self, e: ir.Expr, min_prec: int) -> str:
        text, prec, exact = self.expr(e)
        if not exact:
            return self.wrap(text, e.dtype)
        return text if prec >= min_prec else f"({text})"

    def ring_operand(self, e: ir.Expr, min_prec: int) -> str:
        """An operand of a ring op: right modulo 2**bits is enough."""
        text, prec, _ = self.expr(e)
        return text if prec >= min_prec else f"({text})"

    def typed(self, e: ir.Expr) -> str:
        """`value(e)`, and for ints also of numba type e.dtype (for locals and returns)."""
        text, prec, exact = self.expr(e)
        if e.dtype.is_int and not (isinstance(e, ir.Var) and exact):
            return self.wrap(text, e.dtype)
        return text

    def cond(self, e: ir.Expr) -> str:
        """A Python truth value for `if`/`while`."""
        if isinstance(e, ir.Op) and e.op in COMPARE:
            return (f"{self.operand(e.args[0], CMP + 1)} {COMPARE[e.op]} "
                    f"{self.operand(e.args[1], CMP + 1)}")
        if isinstance(e, ir.Op) and e.op in ("and", "or"):
            joiner = " & " if e.op == "and" else " | "
            return joiner.join(f"({self.cond(a)})" for a in e.args)
        if isinstance(e, ir.Op) and e.op == "not":
            return f"not ({self.cond(e.args[0])})"
        return f"{self.operand(e, CMP + 1)} != 0"

    def expr(self, e: ir.Expr):
        """-> (text, precedence, exact). Not exact: an int correct only modulo 2**bits."""
        if isinstance(e, ir.Const):
            if e.dtype == T.f32:
                return self.f32_constant(e.value), ATOM, True
            if e.dtype.is_float:
                return _float_literal(e.value, e.dtype), ATOM, True
            value = int(e.value)
            return str(value), (ATOM if value >= 0 else UNARY), True
        if isinstance(e, ir.Var):
            return self.read(e.name), ATOM, True
        if isinstance(e, ir.Load):
            return self.access(e.field, e.indices, e.loc), ATOM, True
        return self.op(e)

    def op(self, e: ir.Op):
        op, args, dtype = e.op, e.args, e.dtype
        is_int = dtype.is_int
        if op == "random":
            return self.random_names[id(e)], ATOM, True
        if op in BINARY:
            sym, prec = BINARY[op]
            if is_int and op in RING:
                a, b = self.ring_operand(args[0], prec), self.ring_operand(args[1], prec + 1)
                return f"{a} {sym} {b}", prec, False
            a, b = self.operand(args[0], prec), self.operand(args[1], prec + 1)
            return f"{a} {sym} {b}", prec, not (is_int and op == "floordiv")
        if op == "pow":
            a, b = self.operand(args[0], POW + 1), self.operand(args[1], UNARY)
            return f"{a} ** {b}", POW, not is_int
        if op == "neg":
            if is_int:
                return f"-{self.ring_operand(args[0], UNARY)}", UNARY, False
            return f"-{self.operand(args[0], UNARY)}", UNARY, True
        if op == "bit_not":
            return f"~{self.ring_operand(args[0], UNARY)}", UNARY, False
        if op in COMPARE or op in ("and", "or", "not"):
            return f"int32({self.cond(e)})", ATOM, True
        if op == "select":
            c, a, b = self.cond(args[0]), self.value(args[1]), self.value(args[2])
            if any(isinstance(x, ir.Load) for x in (*ir.walk_expr(args[1]),
                                                      *ir.walk_expr(args[2]))):
                return f"({a} if {c} else {b})", ATOM, True     # only the chosen load runs
            self.helpers.add("select")
            return f"select({c}, {a}, {b})", ATOM, True
        if op == "cast":
            source = args[0].dtype
            if source == dtype:
                return self.expr(args[0])
            return self.wrap(self.value(args[0]), dtype), ATOM, True
        if op == "stop_grad":
            return self.expr(args[0])
        if op == "abs":
            return f"abs({self.value(args[0])})", ATOM, not is_int
        if op in ("min", "max"):
            a, b = self.value(args[0]), self.value(args[1])
            if is_int or self.target == "cuda":
                return f"{op}({a}, {b})", ATOM, True
            return f"np.{op}imum({a}, {b})", ATOM, True
        if op in ("floor", "ceil", "round"):
            if is_int:
                return self.expr(args[0])
            a = self.value(args[0])
            if self.target == "cuda":
                fn = {"floor": "floorf", "ceil": "ceilf", "round": "rintf"}[op]
                if dtype == T.f64:
                    fn = fn[:-1]
                return f"libdevice.{fn}({a})", ATOM, True
            fn = {"floor": "np.floor", "ceil": "np.ceil", "round": "np.rint"}[op]
            return f"{fn}({a})", ATOM, True
        if op == "rsqrt":
            one = self.f32_constant(1.0) if dtype == T.f32 else "1.0"
            return f"{one} / math.sqrt({self.value(args[0])})", MUL, True
        if op in MATH:
            inner = ", ".join(self.value(a) for a in args)
            return f"{MATH[op]}({inner})", ATOM, True
        raise CodegenError(f"no code generation for op {op!r}")

    def f32_constant(self, value) -> str:
        """A module-level np.float32 constant: numba types a global once, where a
        `float32(c)` call costs a typed call at every use (compile time)."""
        text = _float_literal(value, T.f32)
        if text not in self.constants:
            inner = text[len("float32("):-1]
            name = "_f32_" + (inner.replace("np.", "").replace("-", "m").replace(".", "p")
                              .replace("+", ""))
            self.constants[text] = sanitize(name)
        return self.constants[text]

    def index_tuple(self, indices) -> str:
        parts = [self.value(i) for i in indices]
        if not parts:
            return "(0,)"
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"

    def access(self, fld, indices, loc) -> str:
        array = self.arrays[id(fld)]
        if not indices:
            return f"{array}[0]"
        if self.debug and self.target == "cpu":
            site = len(self.sites)
            self.sites.append(Site(fld, loc))
            self.helpers.add("check_index")
            ix = ", ".join(f"int64({self.value(i)})" for i in indices)
            ix = f"({ix},)" if len(indices) == 1 else f"({ix})"
            return f"{array}[check_index({site}, {array}.shape, {ix})]"
        return f"{array}[{', '.join(self.value(i) for i in indices)}]"

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
                    if x.dtype.name in ("i64", "u8"):
                        value = self.wrap(value, x.dtype)
                    self.line(depth, f"{name} = {value}", loc)

    def block(self, stmts, depth, ctx):
        if not stmts:
            self.line(depth, "pass")
        for s in stmts:
            self.stmt(s, depth, ctx)

    def stmt(self, s, depth, ctx):
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
            index = ", ".join(["_chunk", *(self.value(i) for i in s.indices)])
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
        elif s.field.dtype.is_int or self.target == "cuda":
            self.line(depth, f"{target} = {s.op}({target}, {value})", s.loc)
        else:
            self.line(depth, f"{target} = np.{s.op}imum({target}, {value})", s.loc)

    def atomic_call(self, s: ir.AtomicOp, depth, ctx):
        array = self.arrays[id(s.field)]
        index = self.index_tuple(s.indices)
        value = self.value(s.value)
        if s.field.dtype.is_int:
            value = self.wrap(value, s.field.dtype)
        if self.target == "cuda":
            call = f"cuda.atomic.{s.op}({array}, {index}, {value})"
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
            self.line(depth, f"for {self.local[s.var]} in {self.bounds(s)}:", s.loc)
            self.block(s.body, depth + 1, ctx)
            return
        self.parallel_loop(s, plan, depth, ctx)

    def parallel_loop(self, s, plan, depth, ctx):
        for acc, fld, indices, dtype in plan.reductions:
            self.line(depth, f"{acc} = {self.zero(dtype, wrap=False)}", s.loc)
        for fld, copies in plan.private.values():
            array = self.arrays[id(fld)]
            self.line(depth, f"{copies} = np.zeros((_CHUNKS,) + {array}.shape, "
                             f"{NP_TYPE[fld.dtype.name]})  # per-chunk copies of {array}")
        lo, hi = self.value(s.start), self.value(s.stop)
        var = self.local[s.var]
        if plan.private:
            # one chunk of the range per thread, each adding into its own copies (no thread id:
            # numba.get_thread_id() would make the kernel uncacheable)
            self.uses_chunks = True
            n = hi if lo == "0" else f"({hi} - {lo})"
            start = "" if lo == "0" else f"{lo} + "
            self.line(depth, "for _chunk in prange(_CHUNKS):  # parallel, one chunk per thread",
                      s.loc)
            self.line(depth + 1, f"for {var} in range({start}_chunk * {n} // _CHUNKS, "
                                 f"{start}(_chunk + 1) * {n} // _CHUNKS):")
            depth += 1
        elif self.target == "cuda":   # grid-stride: any grid covers the range
            first = "cuda.grid(1)" if lo == "0" else f"{lo} + cuda.grid(1)"
            self.line(depth, f"for {var} in range({first}, {hi}, cuda.gridsize(1)):  # parallel",
                      s.loc)
        else:
            rng = f"prange({hi})" if lo == "0" else f"prange({lo}, {hi})"
            self.line(depth, f"for {var} in {rng}:  # parallel", s.loc)
        inner = _Ctx(plan, "_rsp")
        self.scope_prologue(id(s), depth + 1, inner, index=var, stream=plan.ordinal)
        self.block(s.body, depth + 1, inner)
        if plan.private:
            depth -= 1
        for acc, fld, indices, dtype in plan.reductions:
            target = self.access(fld, indices, s.loc)
            self.line(depth, f"{target} += {acc}", s.loc)
        for fld, copies in plan.private.values():
            array = self.arrays[id(fld)]
            flat, rows, k, t, total = (self.names.temp(n)
                                       for n in ("flat", "rows", "k", "t", "sum"))
            self.line(depth, f"{flat} = {array}.reshape(-1)  # add up the per-thread copies")
            self.line(depth, f"{rows} = {copies}.reshape(_CHUNKS, -1)")
            self.line(depth, f"for {k} in prange({flat}.shape[0]):")
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
        parts = [f"types.Array(types.{NUMBA_TYPE[f.dtype.name]}, {f.data.ndim}, \"C\")"
                 for f in self.fields]
        parts += [f"types.{NUMBA_TYPE[a.dtype.name]}" for a in self.kernel.args]
        if self.uses_random:
            parts.append("types.int64")
        ret = f"types.{NUMBA_TYPE[self.kernel.ret.name]}" if self.kernel.ret else "types.none"
        return f"{ret}(\n    " + ",\n    ".join(parts) + ",\n)" if parts else f"{ret}()"

    def params(self) -> list[str]:
        params = [self.field_names[id(f)] for f in self.fields]
        params += [self.local[a.name] for a in self.kernel.args]
        if self.uses_random:
            params.append(self.seed)
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
                [f"    {self.seed}: the launch's random seed"] if self.uses_random else []) + [
                "", "The kernel's IR:", "", *format_kernel(k).splitlines(), '"""']

    def cpu_module(self) -> str:
        self.lines = []
        body_start = len(self.lines)
        top = _Ctx(None, "_rs")
        for f in self.fields:
            if f.data.ndim == 0:
                self.line(1, f"{self.arrays[id(f)]} = {self.field_names[id(f)]}.reshape(1)"
                          "  # a 0-d field as 1 element")
        self.scope_prologue(None, 1, top, index="-1")
        self.block(self.kernel.body, 1, top)
        body = self.lines[body_start:]
        parallel = bool(self.loops)
        options = ["error_model=\"numpy\"", "cache=True"]
        if parallel:
            options.insert(0, "parallel=True")
        if self.debug:
            options.append("boundscheck=True")
        out = self.header()
        out += ["import math", "", "import numpy as np",
                "from numba import float32, float64, int32, int64, njit, prange, types, uint8, "
                "uint64"]
        if self.uses_chunks:
            out += ["", f"_CHUNKS = {chunks()}  # numba's thread count when this was generated"]
        if self.atomics_used:
            out.append(f"from compile.atomics import {', '.join(sorted(self.atomics_used))}")
        if self.constants:
            out += [""] + [f"{name} = np.{text}" for text, name in self.constants.items()]
        if self.helpers & set(rt.RANDOM):
            out.append(f"from compile.rt import {', '.join(rt.CONSTANTS)}")
        if self.helpers:
            out += ["", "", rt.helper_source(self.helpers, "@njit(error_model=\"numpy\")")]
        name = self.entry
        out += ["", "", f"@njit({self.signature()}, {', '.join(options)})",
                f"def {name}({', '.join(self.params())}):"]
        out += body
        return "\n".join(out) + "\n"


def _python_bound(e: ir.Expr, args: set) -> bool:
    """Can the driver compute this loop bound in Python (constants and arguments only)?"""
    for x in ir.walk_expr(e):
        if isinstance(x, ir.Load) or (isinstance(x, ir.Var) and x.name not in args):
            return False
        if isinstance(x, ir.Op) and x.op not in ("add", "sub", "mul", "floordiv", "mod", "neg",
                                                 "cast", "min", "max"):
            return False
    return True


class _CudaModule:
    """The CUDA half of the generator: segments, carried locals, the Python driver."""

    def __init__(self, gen: "_Generator"):
        self.gen = gen

    def segments(self):
        gen, body = self.gen, self.gen.kernel.body
        segments, current = [], []
        for s in body:
            if isinstance(s, ir.For) and id(s) in gen.loops:
                if current:
                    segments.append(("serial", current))
                    current = []
                segments.append(("parallel", [s]))
            else:
                current.append(s)
        if current or not segments:
            segments.append(("serial", current))
        # a save stack at the top level lives in one thread's local memory: it cannot be
        # shared by two launches, so such a kernel runs as one serial segment
        for name, scope in gen.stack_scope.items():
            if scope is None and sum(name in _referenced(st) for _, st in segments) > 1:
                gen.loops.clear()
                gen.plan_all_scopes()
                return [("serial", list(body))]
        return segments

    def source(self) -> str:
        gen = self.gen
        k = gen.kernel
        segments = self.segments()
        args = {a.name for a in k.args}
        refs = [_referenced(st) for _, st in segments]
        writes = [_assigned(st) if kind == "serial" else set() for kind, st in segments]
        carried = [n for n in list(gen.types) if any(
            n in writes[i] and any(n in refs[j] for j in range(len(segments)) if j != i)
            for i in range(len(segments)))]
        carry = {n: f"_c_{gen.local[n]}" for n in carried}
        params = ([gen.field_names[id(f)] for f in gen.fields]
                  + [gen.local[a.name] for a in k.args] + list(carry.values()) + ["_err"]
                  + (["_ret"] if k.ret else []) + ([gen.seed] if gen.uses_random else []))
        name = gen.entry
        kernels, launches = [], []
        for i, (kind, stmts) in enumerate(segments):
            gen.lines = []
            gen.last_loc = None
            ctx = _Ctx(None, "_rs")
            gen.scope_prologue(None, 1, ctx, index=str(-1 - i), only=refs[i] - set(carry))
            for n in carried:
                if n in refs[i]:
                    gen.line(1, f"{gen.local[n]} = {carry[n]}[0]")
            gen.block(stmts, 1, ctx)
            for n in carried:
                if n in writes[i]:
                    gen.line(1, f"{carry[n]}[0] = {gen.local[n]}")
            seg = gen.names.take(f"{name}_{i}")      # never shadowed by a parameter
            what = "one thread" if kind == "serial" else "a grid-stride loop"
            kernels += ["", "", "@cuda.jit", f"def {seg}({', '.join(params)}):",
                        f'    """segment {i}: {what}."""', *gen.lines]
            if kind == "serial":
                launches.append(f"    {seg}[1, 1]({', '.join(params)})")
            else:
                loop = stmts[0]
                trip = _static_trip(loop)
                if trip is not None:
                    n = str(trip)
                elif _python_bound(loop.start, args) and _python_bound(loop.stop, args):
                    n = f"int({gen.value(loop.stop)}) - int({gen.value(loop.start)})"
                else:
                    n = "None"
                launches += [f"    _blocks, _threads = grid({n})",
                             f"    {seg}[_blocks, _threads]({', '.join(params)})"]
        driver = ["", "", f"def launch({', '.join(params)}):",
                  '    """Run the segments in order (the arrays are device arrays)."""']
        driver += launches
        out = gen.header()
        out += ["import math", "", "import numpy as np",
                "from numba import cuda, float32, float64, int32, int64, uint8, uint64",
                "from compile.cuda import grid, libdevice"]
        if gen.constants:
            out += [""] + [f"{c} = np.{text}" for text, c in gen.constants.items()]
        if gen.helpers & set(rt.RANDOM):
            out.append(f"from compile.rt import {', '.join(rt.CONSTANTS)}")
        if gen.helpers:
            out += ["", "", rt.helper_source(gen.helpers, "@cuda.jit(device=True)")]
        out += kernels + driver
        self.carried = [(n, k.args[[a.name for a in k.args].index(n)].dtype if n in args
                         else gen.types[n], n in args) for n in carried]
        return "\n".join(out) + "\n"


@dataclass
class _Ctx:
    loop: _Loop | None      # the prange loop being emitted, if any
    state: str              # the random stream's local


def generate_cuda(kernel: ir.Kernel, debug: bool = False) -> Generated:
    gen = _Generator(kernel, "cuda", debug, 0)
    module = _CudaModule(gen)
    source = module.source()
    written = sorted({gen.fields.index(s.field) for s in ir.walk_stmts(kernel.body)
                      if isinstance(s, (ir.Store, ir.AtomicOp))})
    generated = Generated(kernel, "cuda", source, "launch", gen.fields,
                          [a.dtype for a in kernel.args], gen.uses_random, kernel.ret,
                          bool(gen.loops), [], written)
    generated.carried = module.carried
    return generated


def chunks() -> int:
    """How many chunks a loop with per-thread copies is cut into: numba's thread count."""
    from numba import config  # noqa: PLC0415
    return max(int(config.NUMBA_NUM_THREADS), 1)


def parallel_min_default() -> int:
    value = os.environ.get("TINYAD_PARALLEL_MIN")
    return int(value) if value not in (None, "") else PARALLEL_MIN


def generate_cpu(kernel: ir.Kernel, debug: bool = False, parallel_min: int | None = None
                 ) -> Generated:
    gen = _Generator(kernel, "cpu", debug,
                     parallel_min_default() if parallel_min is None else parallel_min)
    source = gen.cpu_module()
    written = sorted({gen.fields.index(s.field) for s in ir.walk_stmts(kernel.body)
                      if isinstance(s, (ir.Store, ir.AtomicOp))})
    return Generated(kernel, "cpu", source, gen.entry, gen.fields,
                     [a.dtype for a in kernel.args], gen.uses_random, kernel.ret,
                     bool(gen.loops), gen.sites, written)
