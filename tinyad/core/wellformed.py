"""IR well-formedness, checked after the frontend and after every transform.

A failure here is a bug in tinyad, not in the user's program, so it raises AssertionError-like
IRVerifyError with the printed statement.
"""
from __future__ import annotations

from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.ops import TABLE
from tinyad.core.printer import format_stmt


class IRVerifyError(Exception):
    """The IR broke an invariant: a tinyad bug. The message shows the statement."""


def check_wellformed(kernel: ir.Kernel) -> ir.Kernel:
    local_types: dict[str, T.DType] = {a.name: a.dtype for a in kernel.args}
    _check_block(kernel.body, local_types, in_loop=False, top=True)
    # A save may come before the local's first assignment (in a loop's first iteration), so
    # saves and restores are checked against every local of the kernel.
    for stmt in ir.walk_stmts(kernel.body):
        if isinstance(stmt, (ir.Save, ir.Restore)) and stmt.name not in local_types:
            _fail(f"{type(stmt).__name__.lower()} of a local that is never assigned", stmt)
    return kernel


def _fail(message, node):
    shown = format_stmt(node) if isinstance(node, ir.Stmt) else repr(node)
    raise IRVerifyError(f"{message}\n  in: {shown}\n  at: {node.loc}")


def _define(name, dtype, types, node):
    if types.setdefault(name, dtype) != dtype:
        _fail(f"local {name} assigned {dtype}, but it is {types[name]}", node)


def _check_block(block, types, in_loop, top=False):
    for k, stmt in enumerate(block):
        if not isinstance(stmt, ir.STMT_NODES):
            _fail(f"not a statement: {type(stmt).__name__}", stmt)
        for expr in ir.stmt_exprs(stmt):
            _check_expr(expr, types, stmt)
        if isinstance(stmt, ir.Assign):
            _define(stmt.name, stmt.value.dtype, types, stmt)
        elif isinstance(stmt, (ir.Store, ir.AtomicOp)):
            if stmt.value.dtype != stmt.field.dtype:
                _fail(f"{stmt.field.name} is {stmt.field.dtype}, stored value is {stmt.value.dtype}", stmt)
            rank = ir.array_rank(stmt.field)
            if len(stmt.indices) != rank:
                _fail(f"{stmt.field.name} needs {rank} indices", stmt)
            if isinstance(stmt, ir.AtomicOp):
                if stmt.op not in ir.ATOMIC_OPS or (stmt.op in ir.BITWISE_ATOMICS
                                                    and not stmt.field.dtype.is_int):
                    _fail(f"atomic {stmt.op} on {stmt.field.dtype} field {stmt.field.name}", stmt)
                if stmt.result:
                    _define(stmt.result, stmt.field.dtype, types, stmt)
        elif isinstance(stmt, ir.For):
            _define(stmt.var, T.i32, types, stmt)
            _check_block(stmt.body, types, True)
        elif isinstance(stmt, ir.While):
            _check_block(stmt.body, types, True)
        elif isinstance(stmt, ir.If):
            _check_block(stmt.then, types, in_loop)
            _check_block(stmt.orelse, types, in_loop)
        elif isinstance(stmt, ir.Break) and not in_loop:
            _fail("break outside a loop", stmt)
        elif isinstance(stmt, ir.Return) and not (top and k == len(block) - 1):
            _fail("return must end the kernel", stmt)


def _check_expr(expr, types, stmt):
    for sub in ir.walk_expr(expr):
        if isinstance(sub, ir.Var):
            if sub.name not in types:
                _fail(f"local {sub.name} read before any assignment", stmt)
            if types[sub.name] != sub.dtype:
                _fail(f"{sub.name} read as {sub.dtype}, but it is {types[sub.name]}", stmt)
        elif isinstance(sub, ir.Load):
            rank = ir.array_rank(sub.field)
            if len(sub.indices) != rank:
                _fail(f"{sub.field.name} needs {rank} indices", stmt)
            if any(not i.dtype.is_int for i in sub.indices):
                _fail(f"{sub.field.name} indexed with a non-integer", stmt)
        elif isinstance(sub, ir.Op):
            spec = TABLE.get(sub.op)
            if spec is None or len(sub.args) != spec.arity:
                _fail(f"bad op {sub.op} with {len(sub.args)} operands", stmt)
            if spec.kind in ("arith", "float") and any(a.dtype != sub.dtype for a in sub.args):
                _fail(f"{sub.op} operands {[a.dtype for a in sub.args]} differ from {sub.dtype}", stmt)
        elif not isinstance(sub, ir.Const):
            _fail(f"not an expression: {type(sub).__name__}", stmt)
