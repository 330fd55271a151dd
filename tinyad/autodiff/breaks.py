"""`break` out of serial loops, rewritten as a flag, so reverse mode can differentiate the loop.

    for j in range(n):                   running = 1
        a                                for j in range(n):
        if c:                    ->          if running:
            break                                a
        b                                        if c:
                                                     running = 0
                                                 if running:
                                                     b

The loop runs every iteration and the guarded body does nothing after the break, so each local
and each load takes the values it took in the loop with `break` (the adjoint's replay reads what
the primal read). A `while` loop also stops: its condition becomes `running and cond`. Reverse
mode then sees a loop without `break`: the flag is an ordinary local, saved per iteration, and
the `if`s restore the iteration where the loop stopped. Only the adjoint kernel is rewritten; the
primal keeps its `break`. A `break` in a kernel's parallel (outermost) loop is left alone.
"""
from __future__ import annotations

from dataclasses import replace

from tinyad.analysis.queries import direct_break
from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T


def without_breaks(kernel: ir.Kernel) -> ir.Kernel:
    if not any(isinstance(s, ir.Break) for s in ir.walk_stmts(kernel.body)):
        return kernel
    taken = set(ir.local_types(kernel))
    return replace(kernel, body=tuple(_Rewrite(taken).block(kernel.body)))


class _Rewrite:
    def __init__(self, taken: set):
        self.taken = taken

    def flag(self) -> str:
        n = 0
        while f"running{n}" in self.taken:
            n += 1
        self.taken.add(f"running{n}")
        return f"running{n}"

    def block(self, stmts) -> list:
        """Loops inside `stmts` rewritten (a `break` of an enclosing loop is left for it)."""
        out = []
        for s in stmts:
            if isinstance(s, ir.If):
                s = ir.If(s.cond, tuple(self.block(s.then)), tuple(self.block(s.orelse)), s.loc)
            elif isinstance(s, (ir.For, ir.While)):
                out += self.loop(s)
                continue
            out.append(s)
        return out

    def loop(self, s) -> list:
        body = self.block(s.body)
        if not direct_break(body) or (isinstance(s, ir.For) and s.parallel):
            return [_with_body(s, body)]
        flag = self.flag()
        with B.at(s.loc):
            running = ir.Var(flag, T.i32, s.loc)
            guarded = _guard(body, flag, running)
            if isinstance(s, ir.While):
                cond = B.binary("and", running, s.cond)
                loop = ir.While(cond, tuple(guarded), s.loc)
            else:
                loop = _with_body(s, [ir.If(running, tuple(guarded), (), s.loc)])
            return [ir.Assign(flag, B.const(1, T.i32), s.loc), loop]


def _guard(stmts, flag: str, running: ir.Var) -> list:
    """`stmts` with each direct `break` setting the flag, and what follows a statement that may
    break guarded by the flag."""
    out = []
    for k, s in enumerate(stmts):
        if isinstance(s, ir.Break):
            out.append(ir.Assign(flag, B.const(0, T.i32), s.loc))
            return out                     # the rest of this block never runs
        if isinstance(s, ir.If) and direct_break([s]):
            out.append(ir.If(s.cond, tuple(_guard(s.then, flag, running)),
                             tuple(_guard(s.orelse, flag, running)), s.loc))
            rest = _guard(stmts[k + 1:], flag, running)
            if rest:
                out.append(ir.If(running, tuple(rest), (), s.loc))
            return out
        out.append(s)
    return out


def _with_body(s, body):
    if isinstance(s, ir.For):
        return ir.For(s.var, s.start, s.stop, tuple(body), s.parallel, s.reverse, s.loc)
    return ir.While(s.cond, tuple(body), s.loc)
