"""Expressions: tinyad IR expressions -> Python source text that numba types exactly.

`ExprWriter` is the expression half of the generator (compile/pysource.py), a mixin: it reads
the generator's names (`local`, `current`, `versioned`, `arrays`), target and debug flag, and
records the helpers, f32 constants and debug sites the module will need. How each op is spelled,
per target, is compile/op_spellings.py.
"""
from __future__ import annotations

import builtins
import keyword
import re
from dataclasses import dataclass

import numpy as np

from tinyad.check.checkpoints import IndexChecks
from tinyad.compile import badindex, rt
from tinyad.compile.op_spellings import SPELLINGS
from tinyad.core import ir, ops
from tinyad.core import types as T

NUMBA_TYPE = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "u8": "uint8",
              "i8": "int8", "i16": "int16", "u16": "uint16", "u32": "uint32", "u64": "uint64"}
NP_TYPE = {name: f"np.{numba_name}" for name, numba_name in NUMBA_TYPE.items()}

# Python operator precedence (higher binds tighter), the op table's.
ATOM, UNARY, COMPARE, POW = ops.ATOM, ops.UNARY, ops.COMPARE, ops.POW

RESERVED = (set(keyword.kwlist) | set(dir(builtins))
            | {"np", "math", "numba", "njit", "prange", "cuda", "types", "float32", "float64",
               "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "launch"} | set(rt.HELPERS)
            | set(rt.CONSTANTS) | set(badindex.NAMES))
# and what a CUDA module imports from tinyad.compile.cuda (a field named `grid` would hide it)
CUDA_RESERVED = {"grid", "libdevice", "MAX_THREADS"}


class CodegenError(Exception):
    """The IR uses something the generator does not handle: a tinyad bug."""


@dataclass
class Site:
    """What debug mode checks, and where in the user's code: a field access (its field), a
    divisor (None), or an assert (its message template). Without debug (and on CUDA) the
    accesses the bad-index flag guards (compile/badindex.py)."""
    field: object
    loc: object
    template: str | None = None


def sanitize(name: str) -> str:
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit():
        text = "v" + text
    return text


class Names:
    """Python names for the generated module: unique, never a builtin or helper."""

    def __init__(self, target: str = "cpu"):
        self.used = RESERVED | CUDA_RESERVED if target == "cuda" else set(RESERVED)

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


def float_literal(value, dtype: T.DType) -> str:
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


class ExprWriter:
    """Expression emitting, mixed into the generator."""

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
        if isinstance(e, ir.Op) and ops.TABLE[e.op].kind == "compare":
            a, b = (self.operand(x, COMPARE + 1) for x in e.args)
            if e.op == "ne" and any(x.dtype.is_float for x in e.args):
                return f"({a} < {b}) | ({a} > {b})"     # ordered: false on a NaN (core/ops.py)
            return f"{a} {ops.TABLE[e.op].infix} {b}"
        if isinstance(e, ir.Op) and e.op in ("and", "or"):
            joiner = " & " if e.op == "and" else " | "
            return joiner.join(f"({self.cond(a)})" for a in e.args)
        if isinstance(e, ir.Op) and e.op == "not":
            return f"not ({self.cond(e.args[0])})"
        return f"{self.operand(e, COMPARE + 1)} != 0"

    def expr(self, e: ir.Expr):
        """-> (text, precedence, exact). Not exact: an int correct only modulo 2**bits."""
        if isinstance(e, ir.Const):
            if e.dtype == T.f32:
                return self.f32_constant(e.value), ATOM, True
            if e.dtype.is_float:
                return float_literal(e.value, e.dtype), ATOM, True
            value = int(e.value)
            return str(value), (ATOM if value >= 0 else UNARY), True
        if isinstance(e, ir.Var):
            return self.read(e.name), ATOM, True
        if isinstance(e, ir.Load):
            return self.access(e.field, e.indices, e.loc), ATOM, True
        return self.op(e)

    def op(self, e: ir.Op):
        """The op's spelling for this target (compile/op_spellings.py)."""
        if self.debug and self.target == "cpu" and e.op in ("floordiv", "mod") and e.dtype.is_int:
            return self.checked_division(e)
        if self.debug and self.target == "cpu" and e.op == "pow" and e.dtype.is_int:
            return self.checked_power(e)
        spelling = SPELLINGS[self.target].get(e.op)
        if spelling is None:
            raise CodegenError(f"no {self.target} code generation for op {e.op!r}: add it to "
                               "compile/op_spellings.py")
        return spelling(self, e)

    def checked_division(self, e: ir.Op):
        """Debug mode: integer `//` or `%` whose divisor is checked first (numba's numpy error
        model would give 0), so that a zero raises at the user's line as in interp mode."""
        site = len(self.sites)
        self.sites.append(Site(None, e.loc))
        self.helpers.add("check_divisor")
        left = self.value(e.args[0])
        right = self.value(e.args[1])
        text = f"({left}) {ops.TABLE[e.op].infix} check_divisor({site}, {right})"
        return self.wrap(text, e.dtype), ATOM, True

    def checked_power(self, e: ir.Op):
        """Debug mode: integer `**` whose exponent is checked first, so that a negative one
        raises at the user's line as in interp mode (unchecked, numba gives some integer)."""
        site = len(self.sites)
        self.sites.append(Site(None, e.loc))
        self.helpers.add("check_exponent")
        base = self.operand(e.args[0], POW + 1)
        return f"{base} ** check_exponent({site}, {self.value(e.args[1])})", POW, False

    def f32_constant(self, value) -> str:
        """A module-level np.float32 constant: numba types a global once, where a
        `float32(c)` call costs a typed call at every use (compile time)."""
        text = float_literal(value, T.f32)
        if text not in self.constants:
            inner = text[len("float32("):-1]
            name = "_f32_" + (inner.replace("np.", "").replace("-", "m").replace(".", "p")
                              .replace("+", ""))
            self.constants[text] = sanitize(name)
        return self.constants[text]

    def atomic_index(self, indices) -> str:
        """An atomic's element: a tuple on the CPU (compile/atomics.py takes either); on CUDA an
        integer for a 1-D array (a 0-d field is one element there too), since numba-cuda cannot
        lower a one-element tuple index into a 1-D array (`Cannot cast UniTuple(int64 x 1) to
        int64`, seen only when lowering for a real GPU: the simulator runs Python)."""
        parts = [self.value(i) for i in indices] or ["0"]
        if len(parts) == 1:
            return parts[0] if self.target == "cuda" else f"({parts[0]},)"
        return f"({', '.join(parts)})"

    def prove_indices(self):
        """Which accesses the bad-index flag guards (compile/badindex.py): without debug, those
        the IR does not bound, but for those a loop body's checkpoint covers; on CUDA with
        debug, all. (The CPU's debug mode checks every access by raising instead,
        compile/rt.py check_index.)"""
        self.guarded, self.guard_ranks, self.bad = frozenset(), set(), None
        self.checkpoints, self.record_ranks = {}, set()
        self.bad_slots, self.launch_bounds = 0, None
        if self.debug and self.target == "cpu":
            return
        proof = IndexChecks(self.kernel, everything=self.debug)
        self.guarded = proof.guarded
        self.checkpoints = {id(c.anchor): c for c in proof.checkpoints}
        if proof.guarded or proof.checkpoints:
            self.bad = self.names.temp("bad")
            self.bad_slots = 1 + proof.rank
        if proof.launch_sites:
            self.launch_bounds = badindex.LaunchBounds(self.kernel, proof.launch_sites)

    def checkpoint(self, checkpoint, depth):
        """A loop body's range check of the locals its accesses add offsets to, before the
        first of them (tinyad/check/checkpoints.py): if one is outside its range, its value
        recorded in the bad-index flag and all of them clamped into range."""
        site = len(self.sites)
        self.sites.append(checkpoint)
        self.record_ranks.add(len(checkpoint.names))
        names = [self.read(n) for n in checkpoint.names]
        types = [NUMBA_TYPE[self.types[n].name] for n in checkpoint.names]
        for line in badindex.checkpoint_source(self.bad, site, names, types,
                                               checkpoint.ranges, self.target):
            self.line(depth, line)

    def guarded_index(self, fld, indices, loc) -> str | None:
        """The access's index through its `in_bounds` guard, where the IR does not bound it
        (compile/badindex.py); else None."""
        if not indices or id(indices) not in self.guarded:
            return None
        site = len(self.sites)
        self.sites.append(Site(fld, loc))
        self.guard_ranks.add(len(indices))
        array = self.arrays[id(fld)]
        values = [self.value(i) for i in indices]
        if self.target == "cuda":   # numba compiles a device function per literal argument
            values = [f"int64({v})" if isinstance(i, ir.Const) else v
                      for v, i in zip(values, indices)]
        site_text = f"int64({site})" if self.target == "cuda" else str(site)
        return badindex.guard_call(len(indices), self.bad, site_text, array, values,
                                   self.target)

    def access(self, fld, indices, loc) -> str:
        array = self.arrays[id(fld)]
        if not indices:
            return f"{array}[0]"
        guarded = self.guarded_index(fld, indices, loc)
        if guarded is not None:
            return f"{array}[{guarded}]"
        if self.debug and self.target == "cpu":
            site = len(self.sites)
            self.sites.append(Site(fld, loc))
            self.helpers.add("check_index")
            ix = ", ".join(f"int64({self.value(i)})" for i in indices)
            ix = f"({ix},)" if len(indices) == 1 else f"({ix})"
            return f"{array}[check_index({site}, {array}.shape, {ix})]"
        return f"{array}[{', '.join(self.value(i) for i in indices)}]"
