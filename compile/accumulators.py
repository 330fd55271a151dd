"""Adds into one element across a serial loop kept in a local, in the same order (CPU).

    for j in range(8):                          _home = x_grad[i, 1]
        x_grad[i, 1] += g                       for j in range(8):
        x_grad[j, 1] += -g               ->         _home = float32(_home + g)
                                                    if j == i:
                                                        _home = float32(_home + -g)
                                                    else:
                                                        x_grad[j, 1] += -g
                                                x_grad[i, 1] = _home

An adjoint's scatter (gravity's x.grad[i] += g and x.grad[j] -= g) adds into x.grad[i] at every
iteration; compiled, each add waited for the previous one's store to reach the next load. Where
the loop adds into a field at an index it does not change (the "home"), never reads the field and
never stores to it otherwise, the home's sum stays in a register: each add goes to the local, and
an add whose index equals the home's at run time goes there too, so every element receives the
same adds in the same order, rounded as the store rounded them (to the field's type).

Only where it is sure: the CPU without debug, outside a parallel loop, a loop of at least one
iteration whose bounds are constants, adds at the top of its body, homes that differ in a
constant index from each other, and no index the bad-index flag guards.
TINYAD_CPU_ACCUMULATORS=0 turns it off (to compare).
"""
from __future__ import annotations

import os

from tinyad.analysis.queries import assigned, static_trip
from tinyad.compile.pyexpr import NUMBA_TYPE, CodegenError
from tinyad.core import ir


class Accumulators:
    """Accumulator locals for a loop's adds, mixed into the generator (compile/pysource.py)."""

    def accumulate(self, s: ir.For, depth: int, ctx) -> list:
        """Before the loop `s`: its homes' locals, loaded (`self.promoted` tells atomic() where
        each add goes); -> what `store_accumulators` writes back after it."""
        stores = []
        for fld, indices, adds in self._homes(s, ctx):
            acc = self.names.temp("home")
            target = self.access(fld, indices, s.loc)
            self.line(depth, f"{acc} = {target}  # its adds in a local, in order", s.loc)
            stores.append((target, acc, adds))
            for add in adds:
                self.promoted.setdefault(id(add), []).append((acc, indices))
        return stores

    def store_accumulators(self, stores: list, depth: int) -> None:
        for target, acc, adds in stores:
            if any(id(a) not in self.promoted_done for a in adds):   # (a generator bug)
                raise CodegenError("an add into an accumulated element went to the field")
            self.line(depth, f"{target} = {acc}")
        for _, _, adds in stores:
            for a in adds:
                self.promoted.pop(id(a), None)

    def promoted_atomic(self, s: ir.AtomicOp, depth: int) -> bool:
        """An add into a home's local, or, where its index may be a home's, a test which; False
        where the add is not promoted."""
        homes = self.promoted.get(id(s))
        if homes is None:
            return False
        self.promoted_done.add(id(s))
        sign = "+" if s.op == "add" else "-"
        value = self.store_value(s.value)
        cast = NUMBA_TYPE[s.field.dtype.name]
        keyword = "if"
        for acc, indices in homes:
            test = _same_index(self, s.indices, indices)
            if test == "False":
                continue
            if test == "True":    # (then every other home differs: homes differ pairwise)
                self.line(depth, f"{acc} = {cast}({acc} {sign} ({value}))", s.loc)
                return True
            self.line(depth, f"{keyword} {test}:", s.loc)
            self.line(depth + 1, f"{acc} = {cast}({acc} {sign} ({value}))", s.loc)
            keyword = "elif"
        if keyword == "if":
            self.line(depth, f"{self.access(s.field, s.indices, s.loc)} {sign}= {value}", s.loc)
            return True
        self.line(depth, "else:")
        self.line(depth + 1, f"{self.access(s.field, s.indices, s.loc)} {sign}= {value}", s.loc)
        return True

    def _homes(self, s: ir.For, ctx) -> list:
        """[(field, home indices, the adds into that field)] for the loop's promotable fields."""
        trip = static_trip(s)
        if (os.environ.get("TINYAD_CPU_ACCUMULATORS") == "0" or self.target != "cpu"
                or self.debug or ctx.loop is not None or not trip or s.reverse
                or leaves_early(s)):
            return []
        changed = assigned(s.body) | {s.var}
        adds: dict = {}
        for stmt in s.body:
            if isinstance(stmt, ir.AtomicOp) and stmt.op in ("add", "sub") and \
                    stmt.result is None:
                adds.setdefault(id(stmt.field), []).append(stmt)
        out = []
        for group in adds.values():
            fld = group[0].field
            if self._touched_otherwise(s.body, fld, group) or any(
                    id(a.indices) in self.guarded for a in group):
                continue
            homes = []
            for a in group:
                if _invariant(a.indices, changed) and not any(
                        _same_index(self, a.indices, h) != "False" for h in homes):
                    homes.append(a.indices)
            if homes and all(_same_index(self, h, k) == "False"
                             for n, h in enumerate(homes) for k in homes[n + 1:]):
                out += [(fld, h, group) for h in homes]
        return out

    def _touched_otherwise(self, body, fld, adds) -> bool:
        """Does the loop read the field, store to it, or add into it other than by `adds`?"""
        ours = {id(a) for a in adds}
        for stmt in ir.walk_stmts(body):
            if isinstance(stmt, (ir.Store, ir.AtomicOp)) and stmt.field is fld and \
                    id(stmt) not in ours:
                return True
            for e in ir.stmt_exprs(stmt):
                if any(isinstance(x, ir.Load) and x.field is fld for x in ir.walk_expr(e)):
                    return True
        return False


def _invariant(indices, changed: set) -> bool:
    """Indices of only constants and locals the loop does not change (no loads)."""
    for i in indices:
        for x in ir.walk_expr(i):
            if isinstance(x, ir.Load) or (isinstance(x, ir.Var) and x.name in changed):
                return False
    return True


def _same_index(gen, a, b) -> str:
    """Source text testing whether index tuples `a` and `b` are equal: "True" or "False" where
    that is known from the text (constants, or the same expression)."""
    tests = []
    for x, y in zip(a, b):
        tx, ty = gen.value(x), gen.value(y)
        if isinstance(x, ir.Const) and isinstance(y, ir.Const):
            if int(x.value) != int(y.value):
                return "False"
            continue
        if tx != ty:
            tests.append(f"({tx} == {ty})")
    return " and ".join(tests) if tests else "True"


def leaves_early(loop: ir.For) -> bool:
    """Can the loop's body leave it, or the kernel, before its end (a `break`, a `return`)?
    (A rewritten loop would then skip its write-back, or break out of one group's lanes.)"""
    return any(isinstance(x, (ir.Break, ir.Return)) for x in ir.walk_stmts(loop.body))
