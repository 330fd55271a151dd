"""The check of a parallel loop's accesses to one field, from their indices alone, at
any size.

`y[idx[i]] = f(x[i])` or `x[i] = g(x[i + 1])` in a parallel loop breaks a rule when two
iterations store one element, or one stores an element another reads: the IR cannot always
tell (it depends on idx), and the interpreter, which can, is too slow past a few thousand
elements. But where every index of the field's accesses is computed from the loop variable,
the integer arguments, and integer fields the kernel does not write, the indices are known
before the launch: numpy computes them for every iteration at once (one array operation per IR
op, the op table's own numpy function), and counting finds two iterations on one element.
Values never enter, so a clean answer is the interpreter's.

It is a filter: it proves a launch clean, or leaves it to the launch's recorded accesses
(tinyad/check/accessrecord.py), which the one judge of a launch's accesses reads
(tinyad/check/trail.py) and which name what a report names. `ScatterCheck.of(kernel, field)`
says whether a field qualifies (None if not); `verdict` evaluates one launch: CLEAN, MEETS
(two iterations meet on an element, one storing it: the records decide), or UNDECIDED (an
iteration reads and stores its own element, where the values decide; or the indices cannot be
computed here).
"""
from __future__ import annotations

import numpy as np

from tinyad.analysis.sites import access_sites
from tinyad.check.hazards import unconditional_nodes
from tinyad.core import ir
from tinyad.core.ops import TABLE

CLEAN, MEETS, UNDECIDED = "clean", "meets", "undecided"


class NotIndexOnly(Exception):
    """An index uses something only the launch itself can compute."""


class ScatterCheck:
    """A field's plain stores and loads in one parallel loop, with indices computable before
    the launch."""

    def __init__(self, kernel: ir.Kernel, loop: ir.For, stores: list, loads: list, locals_: dict):
        self.kernel, self.loop, self.locals = kernel, loop, locals_
        self.stores, self.loads = stores, loads
        self.arg_names = [a.name for a in kernel.args]

    @classmethod
    def of(cls, kernel: ir.Kernel, fld) -> "ScatterCheck | None":
        sites = [s for s in access_sites(kernel) if s.field is fld]
        if not sites or any(isinstance(s.node, ir.AtomicOp) for s in sites):
            return None          # accumulated: other hazards than stores and reads
        loop = sites[0].loops[0] if sites[0].loops else None
        if not isinstance(loop, ir.For) or not loop.parallel or any(
                s.loops != (loop,) for s in sites) or not any(s is loop for s in kernel.body):
            return None
        written = set(ir.fields_written(kernel.body))
        top = unconditional_nodes(loop)
        if any(id(s.node) not in top for s in sites):
            return None          # an access in a branch or an inner loop
        # locals the indices may use: assigned once, at the top of the loop body
        counts: dict = {}
        for stmt in ir.walk_stmts(kernel.body):
            if isinstance(stmt, ir.Assign):
                counts[stmt.name] = counts.get(stmt.name, 0) + 1
        locals_ = {stmt.name: stmt.value for stmt in loop.body
                   if isinstance(stmt, ir.Assign) and counts[stmt.name] == 1}
        check = cls(kernel, loop, [s.node for s in sites if isinstance(s.node, ir.Store)],
                    [s.node for s in sites if isinstance(s.node, ir.Load)], locals_)
        allowed = {loop.var, *check.arg_names, *locals_}
        for expr in (loop.start, loop.stop,
                     *(i for s in check.stores + check.loads for i in s.indices)):
            if not check._index_only(expr, allowed, written, set()):
                return None
        return check

    def _index_only(self, e, allowed, written, seen) -> bool:
        if isinstance(e, ir.Const):
            return True
        if isinstance(e, ir.Var):
            if e.name not in allowed or e.name in seen:
                return False
            value = self.locals.get(e.name)
            return value is None or self._index_only(value, allowed, written, seen | {e.name})
        if isinstance(e, ir.Load):
            return (e.field.dtype.is_int and e.field not in written and
                    all(self._index_only(i, allowed, written, seen) for i in e.indices))
        if isinstance(e, ir.Op):
            return e.op != "random" and all(self._index_only(a, allowed, written, seen)
                                            for a in e.args)
        return False

    def verdict(self, scalars: tuple, fld, host):
        """CLEAN, MEETS or UNDECIDED (see the module's docstring). `host(field)`: a field's
        current values."""
        self.host = host
        env = {name: np.asarray(value) for name, value in zip(self.arg_names, scalars)}
        shape = host(fld).shape[:len(fld.shape)]
        if any(not isinstance(i, ir.Const) for s in self.stores for i in s.indices[len(shape):]):
            shape = host(fld).shape   # `m[i][k, l] = v`: components picked at run time differ
        try:
            start = int(self._eval(self.loop.start, env))
            env[self.loop.var] = each = np.arange(start, int(self._eval(self.loop.stop, env)))
            stored = [self._flat(s, env, shape, each) for s in self.stores]
            loaded = [self._flat(s, env, shape, each) for s in self.loads]
        except (NotIndexOnly, ValueError, FloatingPointError, ZeroDivisionError):
            return UNDECIDED
        size = int(np.prod(shape, dtype=np.int64))
        flat = np.concatenate(stored)
        if np.bincount(flat, minlength=size).max(initial=0) > 1:
            iteration = np.concatenate([each] * len(stored))
            order = np.lexsort((iteration, flat))
            flat, iteration = flat[order], iteration[order]
            if np.any((flat[1:] == flat[:-1]) & (iteration[1:] != iteration[:-1])):
                return MEETS
            return UNDECIDED           # one iteration storing an element twice: not a race
        writer = np.full(size, -1, np.int64)        # each element's storing iteration
        for f in stored:
            writer[f] = each
        verdict = CLEAN
        for f in loaded:
            w = writer[f]
            if np.any((w >= 0) & (w != each)):
                return MEETS
            if np.any(w == each):
                verdict = UNDECIDED
        return verdict

    def _flat(self, access, env, shape, each):
        """The flat element index `access` touches in every iteration."""
        index = tuple(np.broadcast_to(self._eval(i, env), each.shape)
                      for i in access.indices[:len(shape)])
        return np.ravel_multi_index(index, shape) if shape else np.zeros(each.shape, np.int64)

    def _eval(self, e, env: dict):
        """`e` for every iteration at once (a numpy array, or a scalar)."""
        if isinstance(e, ir.Const):
            return np.asarray(e.value, e.dtype.np)
        if isinstance(e, ir.Var):
            if e.name not in env:
                env[e.name] = self._eval(self.locals[e.name], env)
            return env[e.name]
        if isinstance(e, ir.Load):
            index = tuple(self._eval(i, env) for i in e.indices)
            data = self.host(e.field)
            if any(np.any((np.asarray(i) < 0) | (np.asarray(i) >= n))
                   for i, n in zip(index, data.shape)):
                raise NotIndexOnly(e)          # out of bounds: the launch itself reports it
            return data[index]
        args = [self._eval(a, env) for a in e.args]
        if e.op == "select":
            return np.where(*args)
        if e.op == "cast":
            return args[0].astype(e.dtype.np)
        if e.op in ("floordiv", "mod") and e.dtype.is_int and np.any(args[1] == 0):
            raise NotIndexOnly(e)
        with np.errstate(all="raise"):
            return np.asarray(TABLE[e.op].eval(*args)).astype(e.dtype.np, copy=False)
