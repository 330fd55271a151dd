"""Which gradients a kernel leaves all zero at every launch, proven from its IR.

DiffTaichi's checkpointed programs clear a scratch grid's gradients with a kernel before each
recomputed step (`for i, j in grid: grid.grad[i, j] = 0`). The rule checkers then know the
gradient is cleared, as by a Python fill(0), without looking at its values, and before the
launch: what a launch overwrites of a primal need not be kept for a gradient it clears.

The proof: every store or atomic into the gradient is a store of 0, and the stores that run
at every launch reach every element: those at the kernel's top level, and those at the top
level of its outer loops (in each iteration: not in a branch or an inner loop, in a loop with
no break). Where they reach is found by running the integer arithmetic on all the
iterations at once, a numpy array per local (a struct-for flattens `for i, j in grid` into
I // n and I % n); a loop's bounds must be known (constants), its trip count at most
ENUMERATED.

Also the stores that set a gradient to 0 beside a store into its field (`gradient_resets`): a
grad_for function that clears a scratch field it recomputes discards no gradient still owed.
"""
from __future__ import annotations

import numpy as np

from tinyad.analysis.queries import assigned, direct_break
from tinyad.core import ir

ENUMERATED = 1 << 20      # iterations a proof runs through at most


def zeroed_gradients(kernel: ir.Kernel) -> tuple:
    """The gradient fields every launch of `kernel` leaves all zero, in program order."""
    stores: dict = {}          # id(gradient) -> every store or atomic into it
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, (ir.Store, ir.AtomicOp)) and s.field.role == "grad":
            stores.setdefault(id(s.field), []).append(s)
    zeros = zero_locals(kernel)
    return tuple(mine[0].field for mine in stores.values()
                 if all(isinstance(s, ir.Store) and is_zero(s.value, zeros)
                        for s in mine) and _reaches_all(kernel, mine))


def _reaches_all(kernel: ir.Kernel, stores: list) -> bool:
    """Do the stores that run at every launch (at the kernel's top level, or at the top level
    of one of its outer loops) reach every element of their field?"""
    fld = stores[0].field
    shape = (*fld.shape, *fld.element_shape)
    reached = np.zeros(ir.array_size(fld), bool)
    ids = {id(s) for s in stores}
    env: dict = {}
    for stmt in kernel.body:
        if isinstance(stmt, ir.For):
            if not _loop_reaches(stmt, ids, shape, reached, env):
                return False
            for name in assigned([stmt]):
                env.pop(name, None)
        elif not _run_stmt(stmt, ids, shape, reached, env):
            return False
    return bool(reached.all())


def _loop_reaches(loop: ir.For, ids, shape, reached, outer: dict) -> bool:
    """Mark what `loop`'s top-level stores among `ids` reach over all its iterations; -> False
    where one of them cannot be followed."""
    start, stop = _run(loop.start, outer), _run(loop.stop, outer)
    if start is None or stop is None or np.ndim(start) or np.ndim(stop) or \
            stop - start > ENUMERATED or direct_break(loop.body):
        # (unknown, if it holds one; a Return stands only last, at the kernel's top level)
        return not any(id(s) in ids for s in loop.body)
    env = dict(outer)
    env[loop.var] = np.arange(int(start), int(stop), dtype=np.int64)
    return all(_run_stmt(stmt, ids, shape, reached, env) for stmt in loop.body)


def _run_stmt(stmt, ids, shape, reached, env: dict) -> bool:
    """One statement of a block that runs in full: a store among `ids` marks what it reaches
    (-> False if that cannot be known); an integer assignment is followed; what anything else
    assigns (in a branch, an inner loop) is forgotten."""
    if id(stmt) in ids:
        flat = _flat_index(stmt.indices, shape, env)
        if flat is None:
            return False
        reached[flat] = True
    elif isinstance(stmt, ir.Assign):
        value = _run(stmt.value, env)
        if value is None:
            env.pop(stmt.name, None)
        else:
            env[stmt.name] = value
    else:
        for name in assigned([stmt]):
            env.pop(name, None)
    return True


def _flat_index(indices, shape, env):
    """The flat element index of a store in every iteration, or None (not known, or out of
    bounds: the proof gives up rather than say what a failing launch does)."""
    columns = [_run(e, env) for e in indices]
    if len(columns) != len(shape) or any(c is None for c in columns):
        return None
    if not shape:          # a 0-D field: its one element
        return 0
    columns = np.broadcast_arrays(*map(np.asarray, columns))
    if any(c.min() < 0 or c.max() >= extent for c, extent in zip(columns, shape)):
        return None
    return np.ravel_multi_index(columns, shape)


_INTEGER_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "min": np.minimum,
                "max": np.maximum}


def _run(expr, env):
    """An integer expression's value in every iteration (an int64 array, or a Python int for
    a constant), or None where it is not plain integer arithmetic on known locals. Floor
    division and modulo only of values that are never negative, where every backend agrees."""
    if not expr.dtype.is_int:
        return None
    if isinstance(expr, ir.Const):
        return int(expr.value)
    if isinstance(expr, ir.Var):
        return env.get(expr.name)
    if not isinstance(expr, ir.Op):
        return None
    args = [_run(a, env) for a in expr.args]
    if any(a is None for a in args):
        return None
    if expr.op == "cast" and len(args) == 1:
        return args[0]
    if expr.op in _INTEGER_OPS and len(args) == 2:
        return _INTEGER_OPS[expr.op](*args)
    if expr.op in ("floordiv", "mod") and len(args) == 2 and \
            np.min(args[0]) >= 0 and np.min(args[1]) > 0:
        return (np.floor_divide if expr.op == "floordiv" else np.mod)(*args)
    return None


# ---- zero constants, and the stores that reset a gradient --------------------------------------

def zero_locals(kernel: ir.Kernel) -> frozenset:
    """The locals a kernel only ever sets to the constant 0 (PlasticineLab's
    `zero = ti.Vector.zero(...)`, then `grid.grad[I] = zero`)."""
    zero, other = set(), set()
    for s in ir.walk_stmts(kernel.body):
        if isinstance(s, ir.Assign):
            (zero if is_zero(s.value) else other).add(s.name)
    return frozenset(zero - other)


def is_zero(value: ir.Expr, zeros: frozenset = frozenset()) -> bool:
    """Is `value` the constant 0, or a read of one of the locals `zeros` (zero_locals), maybe
    cast (`f64(zero_0)`)?"""
    while isinstance(value, ir.Op) and value.op == "cast":
        value = value.args[0]
    if isinstance(value, ir.Const):
        return value.value == 0
    return isinstance(value, ir.Var) and value.name in zeros


def gradient_resets(kernel: ir.Kernel) -> frozenset:
    """ids of the Store nodes that set a gradient to 0 in a kernel that also stores into the
    field itself (`grid[c] = 0` beside `grid.grad[c] = 0`). The adjoint of overwriting a field
    kills its gradient anyway, so a grad_for function that clears a scratch field it recomputes
    (DiffTaichi's diffmpm clears its grid each step) discards no gradient still owed."""
    stored = {id(s.field) for s in ir.walk_stmts(kernel.body)
              if isinstance(s, ir.Store) and s.field.role == "primal"}
    zeros = zero_locals(kernel)
    return frozenset(id(s) for s in ir.walk_stmts(kernel.body)
                     if isinstance(s, ir.Store) and s.field.role == "grad"
                     and is_zero(s.value, zeros) and id(s.field.primal) in stored)
