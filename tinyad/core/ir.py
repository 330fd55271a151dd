"""tinyad IR: a small, closed set of frozen nodes. Every consumer sees only these.

Expressions are trees (as in the source); statements form nested blocks (tuples). Only scalars
exist here: the frontend unrolls vectors, matrices, `ti.static` and `@ti.func` calls before IR.
Every node carries the user's source location, so any consumer can point at the user's line.

    expressions: Const  Var  Load  Op
    statements:  Assign  Store  AtomicOp  If  For  While  Break  Return  Save  Restore  Print
                 Assert
    top level:   Kernel

A field referenced by Load/Store/AtomicOp is the runtime Field object itself (x, x.grad, x.dual).
IR consumers use its description (`.name`, `.dtype`, `.shape`, `.element_shape`, `.role`,
`.grad`), never its storage: where the values live is the backend's business (tinyad/backend.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterator

# print_text: a Print's text; the backends and the code they generate call it as ir.print_text
from tinyad.core.errors import TinyadSyntaxError, print_text  # noqa: F401
from tinyad.core.srcloc import UNKNOWN, SrcLoc
from tinyad.core.types import DType, i32

LOC = field(default=UNKNOWN, compare=False, repr=False)


def is_field(value) -> bool:
    """Is `value` a field (tinyad/field.py)? Asked by marker, so the IR layers below the API
    need not import it."""
    return getattr(value, "is_tinyad_field", False)


class Expr:
    """Base of expressions. Arithmetic on expressions builds new IR (used while tracing): the
    op table installs Python's operators here (core/ops.py, which types them with the rules
    of core/builder.py; both build on this module)."""

    dtype: DType
    loc: SrcLoc

    def __pos__(self): return self

    def __bool__(self):
        raise TinyadSyntaxError(
            "a kernel value has no Python truth value at trace time", self.loc,
            hint="use `if` on it inside the kernel, or ti.select(cond, a, b)")

    # Dataclasses with eq=True drop __hash__; expressions are hashed by identity.
    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: Any
    dtype: DType
    loc: SrcLoc = LOC


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A read of a kernel-local scalar variable."""
    name: str
    dtype: DType
    loc: SrcLoc = LOC


@dataclass(frozen=True, eq=False)
class Load(Expr):
    """A read of one element of a global field."""
    field: Any
    indices: tuple[Expr, ...]
    dtype: DType
    loc: SrcLoc = LOC


@dataclass(frozen=True, eq=False)
class Op(Expr):
    """An operation from the op table (tinyad/ops.py): arithmetic, math, compare, select, cast."""
    op: str
    args: tuple[Expr, ...]
    dtype: DType
    loc: SrcLoc = LOC


class Stmt:
    loc: SrcLoc


@dataclass(frozen=True)
class Assign(Stmt):
    """`name = value` on a kernel-local scalar; the first assignment declares it."""
    name: str
    value: Expr
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class Store(Stmt):
    """`field[indices] = value`: a plain (non-accumulating) global write."""
    field: Any
    indices: tuple[Expr, ...]
    value: Expr
    loc: SrcLoc = LOC


# AtomicOp's ops: the binary op each applies (core/ops.py names); Taichi's `+=`, `-=`, `&=`,
# `|=`, `^=` on a field element are atomic, and so is each ti.atomic_* call.
ATOMIC_OPS = ("add", "sub", "min", "max", "bit_and", "bit_or", "bit_xor")
BITWISE_ATOMICS = ("bit_and", "bit_or", "bit_xor")


@dataclass(frozen=True)
class AtomicOp(Stmt):
    """`field[indices] op= value` for op in ATOMIC_OPS (the bitwise ones on integer fields
    only); `result` names a local that receives the old value (`old = ti.atomic_add(...)`),
    or is None."""
    op: str
    field: Any
    indices: tuple[Expr, ...]
    value: Expr
    result: str | None = None
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class For(Stmt):
    """`for var in range(start, stop)`. `parallel` marks the kernel's outermost loops (Taichi runs
    their iterations in any order); `reverse` iterates stop-1 down to start (adjoint loops)."""
    var: str
    start: Expr
    stop: Expr
    body: tuple[Stmt, ...]
    parallel: bool = False
    reverse: bool = False
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class While(Stmt):
    cond: Expr
    body: tuple[Stmt, ...]
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class Break(Stmt):
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class Return(Stmt):
    """The kernel's return value; only at the kernel's top level, as its last statement."""
    value: Expr
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class Save(Stmt):
    """Adjoint kernels only: push the current value of local `name` on its own stack."""
    name: str
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class Restore(Stmt):
    """Adjoint kernels only: pop the last saved value of local `name` back into it."""
    name: str
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class Print(Stmt):
    """`print(...)` in a kernel: `template` is a str.format template with one `{:spec}` per value
    (Taichi's formats by default), the line's end included: backends show print_text(template,
    values) with Python's print(..., end=""). It only shows values: autodiff ignores it (the
    adjoint kernel prints nothing)."""
    template: str
    values: tuple[Expr, ...]
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class Assert(Stmt):
    """`assert cond, message` in a kernel, checked where bounds are: always in interp mode,
    with debug=True in fast mode (Taichi checks asserts only with debug=True). The message is
    print_text(template, values), formatted as a Print's. Adjoint kernels leave it out."""
    cond: Expr
    template: str
    values: tuple[Expr, ...]
    loc: SrcLoc = LOC


@dataclass(frozen=True)
class Arg:
    name: str
    dtype: DType


@dataclass(frozen=True)
class Kernel:
    name: str
    args: tuple[Arg, ...]
    body: tuple[Stmt, ...]
    ret: DType | None = None
    loc: SrcLoc = LOC

    # str(kernel) is its printed form: core/printer.py installs __str__ (the printer builds
    # on this module)


STMT_NODES = (Assign, Store, AtomicOp, If, For, While, Break, Return, Save, Restore, Print,
              Assert)


def child_blocks(stmt: Stmt) -> tuple[tuple[Stmt, ...], ...]:
    """The nested statement blocks of a statement."""
    if isinstance(stmt, If):
        return (stmt.then, stmt.orelse)
    if isinstance(stmt, (For, While)):
        return (stmt.body,)
    return ()


def with_blocks(stmt: Stmt, blocks) -> Stmt:
    """The statement with its nested blocks replaced, in `child_blocks` order."""
    if isinstance(stmt, If):
        return replace(stmt, then=tuple(blocks[0]), orelse=tuple(blocks[1]))
    if isinstance(stmt, (For, While)):
        return replace(stmt, body=tuple(blocks[0]))
    return stmt


def walk_stmts(block: tuple[Stmt, ...]) -> Iterator[Stmt]:
    """Every statement in a block, nested ones included, in source order."""
    for stmt in block:
        yield stmt
        for inner in child_blocks(stmt):
            yield from walk_stmts(inner)


def stmt_exprs(stmt: Stmt) -> tuple[Expr, ...]:
    """The expressions a statement evaluates itself (not those of nested blocks)."""
    if isinstance(stmt, (Assign, Return)):
        return (stmt.value,)
    if isinstance(stmt, (Store, AtomicOp)):
        return (*stmt.indices, stmt.value)
    if isinstance(stmt, (If, While)):
        return (stmt.cond,)
    if isinstance(stmt, For):
        return (stmt.start, stmt.stop)
    if isinstance(stmt, Print):
        return stmt.values
    if isinstance(stmt, Assert):
        return (stmt.cond, *stmt.values)
    return ()


def walk_expr(expr: Expr) -> Iterator[Expr]:
    """An expression and all its sub-expressions, parents first."""
    yield expr
    if isinstance(expr, Load):
        for index in expr.indices:
            yield from walk_expr(index)
    elif isinstance(expr, Op):
        for arg in expr.args:
            yield from walk_expr(arg)


def fields_written(block: tuple[Stmt, ...]) -> list:
    """The global fields a block stores or applies atomics to, in first-write order."""
    seen: dict[int, Any] = {}
    for stmt in walk_stmts(block):
        if isinstance(stmt, (Store, AtomicOp)):
            seen.setdefault(id(stmt.field), stmt.field)
    return list(seen.values())


def fields_of(block: tuple[Stmt, ...]) -> list:
    """The global fields a block reads or writes, in first-use order."""
    seen: dict[int, Any] = {}
    for stmt in walk_stmts(block):
        if isinstance(stmt, (Store, AtomicOp)):
            seen.setdefault(id(stmt.field), stmt.field)
        for expr in stmt_exprs(stmt):
            for sub in walk_expr(expr):
                if isinstance(sub, Load):
                    seen.setdefault(id(sub.field), sub.field)
    return list(seen.values())


def local_types(kernel: Kernel) -> dict:
    """The dtype of every local of `kernel`: arguments, assigned names, loop variables and the
    results of atomics."""
    types = {a.name: a.dtype for a in kernel.args}
    for s in walk_stmts(kernel.body):
        if isinstance(s, Assign):
            types[s.name] = s.value.dtype
        elif isinstance(s, For):
            types[s.var] = i32
        elif isinstance(s, AtomicOp) and s.result:
            types[s.result] = s.field.dtype
    return types


def array_rank(fld) -> int:
    """How many indices an access to `fld` takes: its shape's, then its elements' components."""
    return len(fld.shape) + len(fld.element_shape)


def array_size(fld) -> int:
    """How many scalars `fld` holds."""
    size = 1
    for extent in (*fld.shape, *fld.element_shape):
        size *= extent
    return size

