"""Fast mode's check of a parallel loop's accesses to one field, from their indices alone, at
any size.

`y[idx[i]] = f(x[i])` or `x[i] = g(x[i + 1])` in a parallel loop breaks a rule when two
iterations store one element, or one stores an element another reads: the IR cannot always
tell (it depends on idx), and the interpreter, which can, is too slow past a few thousand
elements. But where every index of the field's accesses is computed from the loop variable,
the integer arguments, and integer fields the kernel does not write, the indices are known
before the launch: numpy computes them for every iteration at once (one array operation per IR
op, the op table's own numpy function), and counting finds two iterations on one element.
Values never enter, so the answer is the interpreter's. One case it leaves undecided: an
iteration that reads an element and stores it too, where the values decide.

`ScatterCheck.of(kernel, field)` says whether a field qualifies (None if not); `verdict`
evaluates one launch: CLEAN, UNDECIDED, or the rule error.
"""
from __future__ import annotations

import numpy as np

from tinyad.check import rules
from tinyad.check.report import Access
from tinyad.core import analysis, ir
from tinyad.core.ops import TABLE

CLEAN, UNDECIDED = "clean", "undecided"


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
        sites = [s for s in analysis.access_sites(kernel) if s.field is fld]
        if not sites or any(isinstance(s.node, ir.AtomicOp) for s in sites):
            return None          # accumulated: other hazards than stores and reads
        loop = sites[0].loops[0] if sites[0].loops else None
        if not isinstance(loop, ir.For) or not loop.parallel or any(
                s.loops != (loop,) for s in sites) or not any(s is loop for s in kernel.body):
            return None
        written = set(ir.fields_written(kernel.body))
        top = analysis.unconditional_nodes(loop)
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

    def verdict(self, scalars: tuple, launch, fld, host):
        """CLEAN, UNDECIDED (an iteration reads and stores one element; or the indices cannot
        be computed here: the launch reports bad ones), or the rule error for two iterations on
        one element of `fld`. `host(field)`: a field's current values."""
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
            return self._two_stores(stored, each, launch, fld, shape)
        writer = np.full(size, -1, np.int64)        # each element's storing iteration
        for k, f in enumerate(stored):
            writer[f] = each
        for k, f in enumerate(loaded):
            w = writer[f]
            other = np.flatnonzero((w >= 0) & (w != each))
            if len(other):
                j = int(other[0])
                element = tuple(int(i) for i in np.unravel_index(int(f[j]), shape))
                store = next(s for s, g in zip(self.stores, stored) if np.any(g == f[j]))
                error = rules.parallel_conflict(
                    kernel=launch.kernel, field=fld.name, element=element,
                    earlier=self._access("read", self.loads[k], launch, int(each[j])),
                    later=self._access("store", store, launch, int(w[j])))
                met = [g[(writer[g] >= 0) & (writer[g] != each)] for g in loaded[k:]]
                return _counting(error, np.concatenate(met), shape)
            if np.any(w == each):
                return UNDECIDED
        return CLEAN

    def _flat(self, access, env, shape, each):
        """The flat element index `access` touches in every iteration."""
        index = tuple(np.broadcast_to(self._eval(i, env), each.shape)
                      for i in access.indices[:len(shape)])
        return np.ravel_multi_index(index, shape) if shape else np.zeros(each.shape, np.int64)

    def _two_stores(self, stored, each, launch, fld, shape):
        flat = np.concatenate(stored)
        iteration = np.concatenate([each] * len(stored))
        site = np.concatenate([np.full(len(f), k) for k, f in enumerate(stored)])
        order = np.lexsort((iteration, flat))
        flat, iteration, site = flat[order], iteration[order], site[order]
        clash = np.flatnonzero((flat[1:] == flat[:-1]) & (iteration[1:] != iteration[:-1]))
        if not len(clash):
            return UNDECIDED           # one iteration storing an element twice: not a race
        k = int(clash[0])
        element = tuple(int(i) for i in np.unravel_index(int(flat[k]), shape))
        error = rules.parallel_conflict(
            kernel=launch.kernel, field=fld.name, element=element,
            earlier=self._access("store", self.stores[int(site[k])], launch,
                                 int(iteration[k])),
            later=self._access("store", self.stores[int(site[k + 1])], launch,
                               int(iteration[k + 1])))
        return _counting(error, flat[clash], shape)

    @staticmethod
    def _access(kind, node, launch, iteration):
        """An access of iteration `iteration`: the loop variable's value, as interp names it."""
        return Access(kind, node.loc, launch.kernel, launch.number, iteration, None, launch.time)

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


def _counting(error, flat: np.ndarray, shape: tuple):
    """`error`, with every element (flat indices `flat`) two iterations meet on: warn mode
    counts them all, as interp mode reports each (made only if asked for)."""
    error.more_elements = (tuple(int(i) for i in np.unravel_index(int(e), shape))
                           for e in np.unique(flat))
    return error
