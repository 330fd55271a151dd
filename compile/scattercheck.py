"""Fast mode's check of a parallel scatter, from its indices alone, at any size.

`y[idx[i]] = f(x[i])` in a parallel loop breaks a rule when two iterations store one element:
the IR cannot tell (it depends on idx), and the interpreter, which can, is too slow past a few
thousand elements. But where the stored field is never read in the kernel and every index is
computed from the loop variable, the integer arguments, and integer fields the kernel does not
write, those indices are known before the launch: numpy computes them for every iteration at
once (one array operation per IR op, the op table's own numpy function) and a sort finds two
iterations on one element. Values never enter, so the answer is the interpreter's.

`ScatterCheck.of(kernel, field)` says whether a field qualifies (None if not); `first_conflict`
evaluates one launch.
"""
from __future__ import annotations

import numpy as np

from tinyad.check import rules
from tinyad.check.report import Access
from tinyad.core import analysis, ir
from tinyad.core.ops import TABLE


class NotIndexOnly(Exception):
    """An index uses something only the launch itself can compute."""


class ScatterCheck:
    """A field's plain stores in one parallel loop, with indices computable before the launch."""

    def __init__(self, kernel: ir.Kernel, loop: ir.For, stores: list, locals_: dict):
        self.kernel, self.loop, self.stores, self.locals = kernel, loop, stores, locals_
        self.arg_names = [a.name for a in kernel.args]

    @classmethod
    def of(cls, kernel: ir.Kernel, fld) -> "ScatterCheck | None":
        sites = [s for s in analysis.access_sites(kernel) if s.field is fld]
        if not sites or any(not isinstance(s.node, ir.Store) for s in sites):
            return None          # read, or accumulated: other hazards than two stores
        loop = sites[0].loops[0] if sites[0].loops else None
        if not isinstance(loop, ir.For) or not loop.parallel or any(
                s.loops != (loop,) for s in sites) or not any(s is loop for s in kernel.body):
            return None
        written = set(ir.fields_written(kernel.body))
        top = {id(stmt) for stmt in loop.body if not ir.child_blocks(stmt)}
        if any(id(s.node) not in top for s in sites):
            return None          # a store in a branch or an inner loop
        # locals the indices may use: assigned once, at the top of the loop body
        counts: dict = {}
        for stmt in ir.walk_stmts(kernel.body):
            if isinstance(stmt, ir.Assign):
                counts[stmt.name] = counts.get(stmt.name, 0) + 1
        locals_ = {stmt.name: stmt.value for stmt in loop.body
                   if isinstance(stmt, ir.Assign) and counts[stmt.name] == 1}
        check = cls(kernel, loop, [s.node for s in sites], locals_)
        allowed = {loop.var, *check.arg_names, *locals_}
        for expr in (loop.start, loop.stop, *(i for s in check.stores for i in s.indices)):
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

    def first_conflict(self, scalars: tuple, launch, fld, host):
        """Two iterations of this launch that store one element of `fld`: the rule error, or
        None (also when the indices cannot be computed here: the launch reports bad ones).
        `host(field)`: a field's current values."""
        self.host = host
        env = {name: np.asarray(value) for name, value in zip(self.arg_names, scalars)}
        shape = host(fld).shape[:len(fld.shape)]
        try:
            start = int(self._eval(self.loop.start, env))
            stop = int(self._eval(self.loop.stop, env))
            env[self.loop.var] = np.arange(start, stop, dtype=np.int64)
            flats, iterations = [], []
            each = env[self.loop.var]
            for store in self.stores:
                index = tuple(np.broadcast_to(self._eval(i, env), each.shape)
                              for i in store.indices[:len(shape)])
                flats.append(np.ravel_multi_index(index, shape) if shape
                             else np.zeros(each.shape, np.int64))    # a 0-D field
                iterations.append(each)
        except (NotIndexOnly, ValueError, FloatingPointError, ZeroDivisionError):
            return None
        flat, iteration = np.concatenate(flats), np.concatenate(iterations)
        if np.bincount(flat, minlength=1).max(initial=0) <= 1:
            return None       # every element stored at most once: the common, clean case
        site = np.concatenate([np.full(len(f), k) for k, f in enumerate(flats)])
        order = np.lexsort((iteration, flat))
        flat, iteration, site = flat[order], iteration[order], site[order]
        clash = np.flatnonzero((flat[1:] == flat[:-1]) & (iteration[1:] != iteration[:-1]))
        if not len(clash):
            return None
        k = int(clash[0])
        element = tuple(int(i) for i in np.unravel_index(int(flat[k]), shape))

        def store(j):
            return Access("store", self.stores[int(site[j])].loc, launch.kernel, launch.number,
                          int(iteration[j]) - start, None, launch.time)
        return rules.parallel_conflict(kernel=launch.kernel, field=fld.name, element=element,
                                       earlier=store(k), later=store(k + 1))

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
