"""The tree-walking interpreter: runs tinyad IR over numpy-backed fields.

Each IR node is turned once into a Python closure that evaluates it (a closure per node, so the
walk does no dispatching at run time); `Program.run` then executes the closures. What a value is
comes from a domain (interp/domain.py): numpy scalars by default, sympy expressions for symbolic
checks. Global accesses go through a Memory object (interp/memory.py), which bounds-checks and
can log them. Parallel loops run their iterations in order.
"""
from __future__ import annotations

import gc

import numpy as np

from tinyad.core import ir
from tinyad.core.errors import assertion_failed
from tinyad.interp import lanes, random_stream, serial_lanes
from tinyad.interp.domain import NUMERIC
from tinyad.interp.memory import Memory


class _Break(Exception):
    """Unwinds to the innermost loop."""


class Frame:
    """The state of one kernel launch."""
    __slots__ = ("env", "mem", "rng", "stacks", "ret", "seed", "state", "echo")

    def __init__(self, env, mem, rng, seed=0, echo=True):
        self.env, self.mem, self.rng, self.stacks, self.ret = env, mem, rng, {}, None
        self.seed = seed                                     # ti.random(): the launch's seed
        self.state = random_stream.stream(seed, -1)          # and the stream drawn from now
        self.echo = echo     # whether print() statements print (not in checking re-runs)


class _Compiler:
    """Turns IR nodes into closures, asking the value domain for the value-level pieces."""

    def __init__(self, domain, outer_locals=frozenset()):
        self.domain = domain
        self.parallel_loops = 0     # ti.random(): the k-th parallel loop draws from seed + k
        self.in_parallel = False    # a struct-for's inner loops are parallel too: not counted
        self.outer_locals = outer_locals   # for lanes: locals assigned outside parallel loops
        self.kernel = None          # the kernel compiled (serial loops as lanes need it)

    # ---- expressions ---------------------------------------------------------------------
    def expr(self, e: ir.Expr):
        if isinstance(e, ir.Const):
            return self.domain.const(e)
        if isinstance(e, ir.Var):
            name = e.name
            return lambda fr: fr.env[name]
        if isinstance(e, ir.Load):
            field, index = e.field, self.indices(e.indices)
            return lambda fr: fr.mem.load(field, index(fr), e)
        return self.domain.op(e, tuple(self.expr(a) for a in e.args))

    def indices(self, indices):
        parts = tuple(self.expr(i) for i in indices)
        if len(parts) == 1:
            (a,) = parts
            return lambda fr: (int(a(fr)),)
        if len(parts) == 2:
            a, b = parts
            return lambda fr: (int(a(fr)), int(b(fr)))
        return lambda fr: tuple(int(p(fr)) for p in parts)

    # ---- statements ----------------------------------------------------------------------
    def block(self, stmts):
        compiled = tuple(self.stmt(s) for s in stmts)
        if len(compiled) == 1:
            return compiled[0]

        def run(fr):
            for s in compiled:
                s(fr)
        return run

    def stmt(self, s: ir.Stmt):
        kind = type(s)
        if kind is ir.Assign:
            name, value = s.name, self.expr(s.value)

            def assign(fr):
                fr.env[name] = value(fr)
            return assign
        if kind is ir.Store:
            field, index, value = s.field, self.indices(s.indices), self.expr(s.value)
            return lambda fr: fr.mem.store(field, index(fr), value(fr), s)
        if kind is ir.AtomicOp:
            return self.atomic(s)
        if kind is ir.If:
            return self.domain.branch(self.expr(s.cond), self.block(s.then), self.block(s.orelse))
        if kind is ir.For:
            return self.loop(s)
        if kind is ir.While:
            return self.while_loop(s)
        if kind is ir.Break:
            def brk(fr):
                raise _Break
            return brk
        if kind is ir.Return:
            value = self.expr(s.value)

            def ret(fr):
                fr.ret = value(fr)
            return ret
        if kind is ir.Save:
            name = s.name
            return lambda fr: fr.stacks.setdefault(name, []).append(fr.env.get(name))
        if kind is ir.Restore:
            name = s.name

            def restore(fr):
                fr.env[name] = fr.stacks[name].pop()
            return restore
        if kind is ir.Print:
            return self.print_stmt(s)
        if kind is ir.Assert:
            return self.assert_stmt(s)
        raise TypeError(f"interp: unknown statement {s!r}")  # pragma: no cover  (closed IR)

    def print_stmt(self, s: ir.Print):
        template, values = s.template, tuple(self.expr(v) for v in s.values)

        def show(fr):
            if fr.echo:
                print(ir.print_text(template, [v(fr) for v in values]), end="")
        return show

    def assert_stmt(self, s: ir.Assert):
        if self.domain is not NUMERIC:     # a symbolic condition has no truth to check
            return lambda fr: None
        cond, values = self.expr(s.cond), tuple(self.expr(v) for v in s.values)

        def check(fr):
            if not cond(fr):
                raise assertion_failed(s.template, [v(fr) for v in values], s.loc)
        return check

    def atomic(self, s: ir.AtomicOp):
        op, field, result = s.op, s.field, s.result
        index, value = self.indices(s.indices), self.expr(s.value)
        if result is None:
            return lambda fr: fr.mem.atomic(op, field, index(fr), value(fr), s)

        def atomic_with_result(fr):
            fr.env[result] = fr.mem.atomic(op, field, index(fr), value(fr), s)
        return atomic_with_result

    def loop(self, s: ir.For):
        outermost = s.parallel and not self.in_parallel
        if outermost:
            self.parallel_loops += 1
            self.in_parallel = True
        ordinal = self.parallel_loops
        var, start, stop, body = s.var, self.expr(s.start), self.expr(s.stop), self.block(s.body)
        reverse, parallel, i32 = s.reverse, s.parallel, np.int32
        if outermost:
            self.in_parallel = False

        def run(fr):
            lo, hi = int(start(fr)), int(stop(fr))
            env = fr.env
            indices = range(hi - 1, lo - 1, -1) if reverse else range(lo, hi)
            outer_state = fr.state
            try:
                for i in indices:
                    env[var] = i32(i)
                    if parallel:
                        fr.mem.begin_iteration(s, i)
                    if outermost:
                        fr.state = random_stream.stream(fr.seed + ordinal, i)
                    body(fr)
            except _Break:
                pass
            if parallel:
                fr.mem.begin_iteration(s, None)
            if outermost:
                fr.state = outer_state
        if self.domain is not NUMERIC or not lanes.enabled() or self.kernel is None:
            return run
        if not parallel:   # a reduction over a long range, as lanes (interp/serial_lanes.py)
            return serial_lanes.compile_loop(s, self.kernel, run) or run
        # the iterations together, as numpy lanes (None: a loop lanes do not run)
        laned = lanes.compile_loop(s, run, (start, stop), self.outer_locals)
        inner = laned and serial_lanes.serial_work(s, self.kernel, self.outer_locals)
        if inner:   # the longer lanes win: the parallel loop's, or a serial loop's inside it
            return lambda fr: (run if inner(fr) > int(stop(fr)) - int(start(fr)) else laned)(fr)
        return laned or run

    def while_loop(self, s: ir.While):
        cond, body, truth = self.expr(s.cond), self.block(s.body), self.domain.truth

        def run(fr):
            try:
                while truth(cond(fr)):
                    body(fr)
            except _Break:
                pass
        return run


class Program:
    """A kernel's IR, turned into closures once, ready to run many times."""

    def __init__(self, kernel: ir.Kernel, domain=NUMERIC):
        self.kernel = kernel
        self.domain = domain
        compiler = _Compiler(domain, lanes.outer_locals(kernel))
        compiler.kernel = kernel
        self._body = compiler.block(kernel.body) if kernel.body else (lambda fr: None)
        self.uses_random = any(isinstance(x, ir.Op) and x.op == "random"
                               for s in ir.walk_stmts(kernel.body) for e in ir.stmt_exprs(s)
                               for x in ir.walk_expr(e))

    def run(self, scalars: tuple, rng: np.random.Generator | None = None, *,
            memory: Memory | None = None, echo: bool | None = None):
        """Run once with the kernel's scalar arguments (a Program's call, tinyad/backend.py).
        `rng` draws ti.random()'s values (None: a generator seeded with 0). `memory` holds the
        fields' values and sees every access (None: the fields' own arrays, unlogged).
        print() statements print when `echo` (default: in the numeric domain, the one that
        runs users' launches; checks that re-run a launch pass False)."""
        env = {a.name: self.domain.argument(a, v) for a, v in zip(self.kernel.args, scalars)}
        rng = rng or np.random.default_rng(0)
        seed = random_stream.launch_seed(rng) if self.uses_random else 0   # as fast mode draws
        echo = self.domain is NUMERIC if echo is None else echo
        frame = Frame(env, memory or Memory(), rng, seed, echo)
        # A launch makes no reference cycles, but many objects (frames, lanes' arrays), which
        # would set off the cyclic collector again and again: pause it for the launch.
        collecting = gc.isenabled()
        gc.disable()
        try:
            with np.errstate(all="ignore"):
                self._body(frame)
        finally:
            if collecting:
                gc.enable()
        return None if frame.ret is None else self.domain.result(frame.ret)
