"""Short serial loops whose divisions and square roots run 4 or 8 iterations at a time (CPU).

    for j in range(16):                     for _jb in range(0, 16, 8):
      r = x[i, 0] - x[j, 0]                   _v = vsub(x[i, 0], (x[_jb + 0, 0], ..., x[_jb + 7, 0]))
      w = -1.0 / sqrt(r * r + 1e-3)    ->     _v1 = vdiv(_f32_m1p0, vsqrt(vadd(vmul(_v, _v), ...)))
      U[None] += w                            for _k in range(8):
                                                j = _jb + _k
                                                r = _v[_k]
                                                w = _v1[_k]
                                                _U[0] += w

A loop body's leading assignments (its "prefix") that compute from the loop index, from fields
the kernel never writes and from locals the loop does not change are pure: a group of
iterations' prefixes can run before the first one's rest, their float ops in compile/lanes.py's
vector ops (a store's or an add's value too, where it is such arithmetic). The rest (the adds
into U, a gradient's scatter) then runs iteration by iteration, in the original order, with the
prefix's locals taken from their lane: every value is the scalar code's to the bit (each lane
rounds as the scalar op does), and every field sees its stores and adds in the same order. Why:
an N-body step's 64 pairs each divide and take a square root, and compiled one at a time they
waited on the divider (gravity N=8: 0.7 of its 1.3 us a step).

Only where it pays and is sure: the CPU without debug, no ti.random(), outside a parallel loop,
a forward loop of at least four iterations whose bounds are constants, and a prefix with a
division or square root on lanes; no access there that the bad-index flag guards.
TINYAD_CPU_LANES=0 turns it off (to compare).
"""
from __future__ import annotations

import dataclasses
import os

from tinyad.analysis.queries import assigned, referenced, static_trip, without
from tinyad.compile.accumulators import Accumulators, leaves_early
from tinyad.compile.lanes import OPS

# Lanes per group: 8 (two vector registers' worth on AVX2, whose chains of divisions overlap:
# gravity's adjoint 0.54 -> 0.37 us a step against 4) where the loop has 8 iterations, else 4
WIDE, NARROW = 8, 4
from tinyad.core import ir


class _NotLanes(Exception):
    """The expression cannot run on lanes."""


class LaneLoops:
    """Lane loops, mixed into the generator (compile/pysource.py)."""

    def lane_loop(self, s: ir.For, depth: int, ctx) -> bool:
        """Emit `s` 4 or 8 iterations at a time where that is sound and pays; False: not."""
        plan = self._lane_plan(s, ctx)
        if plan is None:
            return False
        prefix, hoisted = plan
        lo, hi = int(s.start.value), int(s.stop.value)
        lanes = self.lane_count = WIDE if hi - lo >= WIDE else NARROW
        full = lo + (hi - lo) // lanes * lanes
        group, lane = self.names.temp("jb"), self.names.temp("k")
        self.line(depth, f"for {group} in range({lo}, {full}, {lanes}):  "
                         f"# {lanes} iterations at a time", s.loc)
        saved = dict(self.current)
        values: dict[str, tuple[str, bool]] = {}     # prefix local -> (its temp, on lanes)
        for stmt in prefix:
            values[stmt.name] = self._lanes_assign(stmt.value, s.var, group, values, depth + 1,
                                                   stmt.loc, typed=True)
            if values[stmt.name][1]:
                self.current.pop(stmt.name, None)
            else:
                self.current[stmt.name] = values[stmt.name][0]
        rest, lanes_of_values = list(s.body[len(prefix):]), []
        for k, stmt in enumerate(rest):
            if id(stmt) in hoisted:           # a store's or an add's value, on lanes
                temp, _ = self._lanes_assign(stmt.value, s.var, group, values, depth + 1,
                                             stmt.loc, typed=False)
                local = f"{temp} (lane)"      # (a name no IR local has)
                self.local[local], self.types[local] = self.names.temp("lane"), stmt.value.dtype
                lanes_of_values.append((self.local[local], temp))
                rest[k] = dataclasses.replace(stmt, value=ir.Var(local, stmt.value.dtype))
                if id(stmt) in self.promoted:       # (compile/accumulators.py)
                    self.promoted[id(rest[k])] = self.promoted[id(stmt)]
                    self.promoted_done.add(id(stmt))
        self.current = saved
        self.line(depth + 1, f"for {lane} in range({lanes}):  # then each in order")
        self.line(depth + 2, f"{self.local[s.var]} = {group} + {lane}")
        read = referenced(s.body[len(prefix):]) | referenced(without(self.kernel.body, s))
        for local, (name, on_lanes) in values.items():
            if local in read:         # (each line costs numba's compile about a millisecond)
                self.line(depth + 2, f"{self.define(local)} = {name}[{lane}]" if on_lanes
                          else f"{self.define(local)} = {name}")
        for name, temp in lanes_of_values:
            self.line(depth + 2, f"{name} = {temp}[{lane}]")
        self.block(rest, depth + 2, ctx)
        if full < hi:
            self.line(depth, f"for {self.local[s.var]} in range({full}, {hi}):", s.loc)
            self.block(s.body, depth + 1, ctx)
        return True

    def _lanes_assign(self, e, var, group, values, depth, loc, typed) -> tuple[str, bool]:
        """A temp holding `e` for the group's lanes (a tuple) or for all (one value)."""
        text, on_lanes = self._lanes_value(e, var, group, values)
        if not on_lanes:
            text = self.typed(e) if typed else self.value(e)
        name = self.names.temp("v" if on_lanes else "s")
        self.line(depth, f"{name} = {text}", loc)
        return name, on_lanes

    def _lane_plan(self, s: ir.For, ctx):
        """(the body's leading assignments that can run on lanes, {id: a later store or add
        whose value can}), or None where the loop is not one for lanes (see the module's
        docstring)."""
        trip = static_trip(s)
        if (os.environ.get("TINYAD_CPU_LANES") == "0" or self.target != "cpu" or self.debug
                or self.uses_random or ctx.loop is not None or s.reverse or trip is None
                or trip < NARROW or leaves_early(s)):
            return None
        changed = assigned(s.body) | {s.var}
        written = {id(f) for f in ir.fields_written(self.kernel.body)}
        on_lanes, defined, prefix, hoisted = {s.var}, set(), [], {}
        self._divides = False
        for stmt in s.body:
            if id(stmt) in self.checkpoints or not isinstance(
                    stmt, (ir.Assign, ir.Store, ir.AtomicOp)):
                break
            lanes = self._lanes_of(stmt.value, s.var, on_lanes, changed - defined, written)
            if isinstance(stmt, ir.Assign):   # (the prefix: assignments before any store)
                if hoisted or lanes is None or (
                        lanes and stmt.value.dtype != self.types.get(stmt.name)):
                    break
                (on_lanes.add if lanes else on_lanes.discard)(stmt.name)
                defined.add(stmt.name)
                prefix.append(stmt)
            elif lanes:
                hoisted[id(stmt)] = stmt
            else:
                break
        return (prefix, hoisted) if self._divides else None

    def _lanes_of(self, e, var, on_lanes, carried, written) -> bool | None:
        """Does `e` run on lanes (True), the same in every lane (False), or not here (None)?"""
        if not self._pure_here(e, carried - {var}, written):
            return None
        try:
            return self._on_lanes(e, var, on_lanes)
        except _NotLanes:
            return None

    def _pure_here(self, e: ir.Expr, carried: set, written: set) -> bool:
        """Does `e` give the same value whenever the loop's iteration runs it: no local the
        loop changes before it is set in the prefix, no field the kernel writes, no guarded
        index (whose check records where it failed)?"""
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Var) and x.name in carried:
                return False
            if isinstance(x, ir.Load) and (id(x.field) in written or
                                           (x.indices and id(x.indices) in self.guarded)):
                return False
        return True

    def _on_lanes(self, e: ir.Expr, var: str, on_lanes: set) -> bool:
        """Does `e` differ between lanes (then it is a float computed by lane ops)? Raises
        _NotLanes where it differs in a way the lane ops do not compute."""
        if isinstance(e, ir.Const):
            return False
        if isinstance(e, ir.Var):
            if e.name == var:
                raise _NotLanes     # (the index as a value: only in a load's index)
            return e.name in on_lanes
        if isinstance(e, ir.Load):
            names = {x.name for i in e.indices for x in ir.walk_expr(i) if isinstance(x, ir.Var)}
            if names & (on_lanes - {var}):
                raise _NotLanes
            if var in names and not e.dtype.is_float:
                raise _NotLanes
            return var in names
        lanes = [self._on_lanes(a, var, on_lanes) for a in e.args]
        if not any(lanes):
            return False
        if e.op not in OPS or not e.dtype.is_float or any(a.dtype != e.dtype for a in e.args):
            raise _NotLanes
        self._divides = self._divides or e.op in ("truediv", "sqrt")
        return True

    def _lanes_value(self, e: ir.Expr, var: str, group: str, values: dict) -> tuple[str, bool]:
        """-> (the source text of `e`, is it a tuple of lanes); `values`: the prefix's temps."""
        if isinstance(e, ir.Var) and e.name in values and values[e.name][1]:
            return values[e.name][0], True
        if isinstance(e, ir.Load) and any(isinstance(x, ir.Var) and x.name == var
                                          for i in e.indices for x in ir.walk_expr(i)):
            before = self.current.get(var)
            loads = []
            for k in range(self.lane_count):
                self.current[var] = f"({group} + {k})"
                loads.append(self.access(e.field, e.indices, e.loc))
            if before is None:
                self.current.pop(var)
            else:
                self.current[var] = before
            return f"({', '.join(loads)})", True
        if isinstance(e, ir.Op):
            parts = [self._lanes_value(a, var, group, values) for a in e.args]
            if any(on for _, on in parts):
                self.lane_ops.add(OPS[e.op])
                return f"{OPS[e.op]}({', '.join(text for text, _ in parts)})", True
        return self.value(e), False


class SerialLoops(LaneLoops, Accumulators):
    """A serial loop: its accumulators around it, on lanes where it can be, else the plain loop
    (the generator's `plain_loop`)."""

    def start_serial_loops(self) -> None:
        self.lane_ops: set[str] = set()       # compile/lanes.py's ops the code calls
        self.promoted: dict = {}              # id(add) -> its accumulators (accumulators.py)
        self.promoted_done: set = set()

    def serial_loop(self, s: ir.For, depth: int, ctx) -> None:
        stores = self.accumulate(s, depth, ctx)
        if not self.lane_loop(s, depth, ctx):
            self.plain_loop(s, depth, ctx)
        self.store_accumulators(stores, depth)

    def serial_loop_imports(self) -> list[str]:
        """The module's imports of what the rewrites' code calls (and the 0-d fields' views)."""
        out = []
        if self.lane_ops:
            out.append(f"from tinyad.compile.lanes import {', '.join(sorted(self.lane_ops))}")
        if any(ir.array_rank(f) == 0 for f in self.fields):
            out.append("from tinyad.compile.views import one_element")
        return out
