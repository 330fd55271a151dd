"""Reverse-mode autodiff as an IR -> IR transform: a kernel -> its adjoint ("grad") kernel.

Taichi's semantics. The adjoint kernel writes no primal field. It has two sweeps:

* forward sweep (replay): recompute the kernel's locals from the *current* global values, with
  stores dropped. An assignment inside a serial loop, or one that overwrites a value, first
  `save`s the old value on the local's own stack (Taichi's adstack, but it never overflows).
* backward sweep: the statements' adjoints in reverse order, loops reversed. Before a statement's
  adjoint runs, every local is `restore`d to the value it had when the statement ran forward, so
  each partial derivative (tinyad/ops.py) is evaluated at the right point.

Adjoints of statements (g is the adjoint flowing out of the statement):
    x = e              g = x_adj; x_adj = 0; restore x; e receives g
    f[i] = e           g = f.grad[i]; f.grad[i] = 0; e receives g   (an overwrite hides the past)
    f[i] += e          e receives f.grad[i]          (-= passes -f.grad[i])
    atomic_max(f[i],e) if e == f[i] (e won): g = f.grad[i]; f.grad[i] = 0; e receives g
    ... e receives g:  each load f[j] in e adds  g * d(e)/d(f[j])  to f.grad[j] (atomically)

A loop whose iterations share no local (the usual case: Taichi scopes a loop body's locals to
it) becomes one loop, reversed if serial, whose iterations each replay and then run the adjoint
of their own body: no stack. Only a loop carrying a local from one iteration to the next is
replayed whole first, with its locals saved.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tinyad.analysis.queries import live_locals
from tinyad.autodiff.activity import Activity, twin_of
from tinyad.autodiff.breaks import without_breaks
from tinyad.check import rules
from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import KernelSimplicityRuleError, TinyadRuntimeError
from tinyad.core.names import Namer
from tinyad.core.ops import TABLE
from tinyad.core.wellformed import check_wellformed


def reverse(kernel: ir.Kernel, notes: list | None = None) -> ir.Kernel:
    """The adjoint kernel of `kernel` (same arguments, no return value). Non-differentiable
    operations met on a gradient path are appended to `notes` as (loc, op)."""
    _reject_grad_loads(kernel)
    kernel = without_breaks(kernel)      # a serial loop's `break` becomes a flag
    transform = _Reverse(kernel)
    body = transform.region(kernel.body, assigned=frozenset(a.name for a in kernel.args))
    body = eliminate_dead_code(body)
    _reject_random(body, kernel.name)
    if notes is not None:
        notes.extend(transform.notes)
    return check_wellformed(ir.Kernel(f"{kernel.name}_grad", kernel.args, tuple(body), None,
                                      kernel.loc))


def _reject_grad_loads(kernel):
    """A kernel that reads a gradient (x.grad[i]) has no adjoint in terms of its primal values:
    refused, as in Taichi, unless the read is wrapped in ti.stop_grad."""
    for stmt in ir.walk_stmts(kernel.body):
        for expr in ir.stmt_exprs(stmt):
            stopped = set()
            for sub in ir.walk_expr(expr):
                if isinstance(sub, ir.Op) and sub.op == "stop_grad":
                    stopped.update(id(e) for e in ir.walk_expr(sub))
                elif (isinstance(sub, ir.Load) and sub.field.role == "grad"
                      and id(sub) not in stopped):
                    raise TinyadRuntimeError(
                        f"Cannot automatically differentiate through a grad tensor: "
                        f"{kernel.name} reads {sub.field.name}", sub.loc,
                        hint="wrap the read in ti.stop_grad(...) if no gradient should flow "
                             "through it, or read it in a kernel that is not differentiated")


def _reject_random(body, name):
    """A replay of ti.random() draws new numbers: the adjoint would differentiate other values."""
    for stmt in ir.walk_stmts(body):
        for expr in ir.stmt_exprs(stmt):
            for sub in ir.walk_expr(expr):
                if isinstance(sub, ir.Op) and sub.op == "random":
                    raise rules.random_in_adjoint(kernel=name, loc=sub.loc)


@dataclass
class _Sweep:
    """What the forward sweep decided, for the backward sweep to mirror."""
    saved: set = field(default_factory=set)         # id(statement) whose target was saved
    names: dict = field(default_factory=dict)       # id(statement) -> helper local names


class _Reverse:
    def __init__(self, kernel: ir.Kernel):
        self.kernel_body = kernel.body
        self.namer = Namer()
        self.local_types: dict[str, T.DType] = ir.local_types(kernel)
        self.namer.used.update(self.local_types)
        self.adjoint_names: dict[str, str] = {}
        self.temps: set[str] = set()
        self.own_regions: set[int] = set()   # id() of loops whose iterations are each a region
        self.activity = Activity("grad")          # every float local carries an adjoint
        self.notes = self.activity.notes          # (loc, op) of non-differentiable ops met

    # ---- names ------------------------------------------------------------------------------
    def adj(self, name: str) -> ir.Var:
        if name not in self.adjoint_names:
            self.adjoint_names[name] = self.namer.fresh(f"{name}_adj")
        return ir.Var(self.adjoint_names[name], self.local_types[name])

    def temp(self, value: ir.Expr, out: list, base="t") -> ir.Var:
        name = self.namer.fresh(base)
        self.temps.add(name)
        out.append(ir.Assign(name, value, B.current_loc()))
        return ir.Var(name, value.dtype, B.current_loc())

    # ---- regions ------------------------------------------------------------------------------
    def region(self, stmts, assigned) -> list:
        """Replay, zero the adjoints, then the reversed adjoints, for one independent region."""
        sweep = _Sweep()
        forward = self.forward(stmts, sweep, set(assigned), in_loop=False)
        backward = self.backward(stmts, sweep)
        zero = [ir.Assign(self.adj(n).name, B.const(0, t)) for n, t in self.local_types.items()
                if t.is_float and n in _assigned_in(stmts, self.own_regions) | set(assigned)]
        # A local the backward sweep never reads needs no saving and restoring. (Its reads
        # through temporaries nothing uses do not count: `acc + t` is bound to a temporary, but
        # neither partial of an add needs its value.)
        needed = _names_read(_prune(backward, self.temps - live_locals(backward)))
        forward, backward = _drop_saves(forward, needed), _drop_saves(backward, needed)
        return forward + zero + backward

    def iterations_independent(self, loop: ir.For, assigned: set) -> bool:
        """Can each iteration of `loop` be differentiated on its own, replayed just before its
        adjoint? So when no local carries a value into the next iteration or out of the loop.
        (A serial loop replayed whole first pushes every local of every iteration on a stack:
        DiffTaichi's wave, a 256-step inner loop of 20 locals, took 50x its forward pass.)"""
        inner = _assigned_in(loop.body, set())
        if inner & assigned or any(isinstance(s, ir.Break) for s in ir.walk_stmts(loop.body)):
            return False
        if loop.parallel:
            return True
        # Serial: Taichi's scoping makes the body's locals its own, and the IR is checked for
        # it: each is assigned before it is read in an iteration, and read nowhere after. A
        # gradient read through stop_grad would see later iterations' adjoints: left whole.
        return (_defined_before_read(loop.body, inner, set())
                and not inner & _names_read_outside(self.kernel_body, loop)
                and not any(isinstance(x, ir.Load) and x.field.role == "grad"
                            for st in ir.walk_stmts(loop.body)
                            for e in ir.stmt_exprs(st) for x in ir.walk_expr(e)))

    # ---- forward sweep ------------------------------------------------------------------------
    def forward(self, stmts, sweep: _Sweep, assigned: set, in_loop: bool) -> list:
        out = []
        for s in stmts:
            with B.at(s.loc):
                self.forward_stmt(s, sweep, assigned, in_loop, out)
        return out

    def _assign(self, name, value, stmt_key, sweep, assigned, in_loop, out):
        if in_loop or name in assigned:
            out.append(ir.Save(name, B.current_loc()))
            sweep.saved.add(stmt_key)
        assigned.add(name)
        out.append(ir.Assign(name, value, B.current_loc()))

    def _helper(self, value, base, key, sweep, assigned, in_loop, out, always=False):
        """Keep a value the backward sweep needs (a condition, a loop bound) in its own local."""
        if isinstance(value, ir.Const) and not always:
            return value
        name = self.namer.fresh(base)
        self.local_types[name] = value.dtype
        sweep.names.setdefault(key, []).append(name)
        self._assign(name, value, (key, name), sweep, assigned, in_loop, out)
        return ir.Var(name, value.dtype, B.current_loc())

    def forward_stmt(self, s, sweep, assigned, in_loop, out):
        if isinstance(s, ir.Assign):
            self._assign(s.name, s.value, id(s), sweep, assigned, in_loop, out)
        elif isinstance(s, ir.AtomicOp) and s.result is not None:
            raise KernelSimplicityRuleError(
                "the value returned by an atomic operation cannot be replayed by the adjoint "
                "kernel", s.loc, hint="move this kernel out of the differentiated code, or "
                "record the returned values in a field in a separate kernel")
        elif isinstance(s, ir.If):
            cond = self._helper(s.cond, "cond", id(s), sweep, assigned, in_loop, out)
            then = self.forward(s.then, sweep, assigned, in_loop)
            orelse = self.forward(s.orelse, sweep, assigned, in_loop)
            out.append(ir.If(cond, tuple(then), tuple(orelse), s.loc))
        elif isinstance(s, ir.For):
            if self.iterations_independent(s, assigned):
                self.own_regions.add(id(s))
                return
            start = self._helper(s.start, "start", id(s), sweep, assigned, in_loop, out)
            stop = self._helper(s.stop, "stop", id(s), sweep, assigned, in_loop, out)
            assigned.add(s.var)
            body = self.forward(s.body, sweep, assigned, in_loop=True)
            out.append(ir.For(s.var, start, stop, tuple(body), False, False, s.loc))
        elif isinstance(s, ir.While):
            count = self._helper(B.const(0, T.i32), "n_iter", id(s), sweep, assigned, in_loop,
                                 out, always=True)
            body = self.forward(s.body, sweep, assigned, in_loop=True)
            body.append(ir.Assign(count.name, B.binary("add", count, 1), s.loc))
            out.append(ir.While(s.cond, tuple(body), s.loc))
        elif isinstance(s, ir.Break):
            raise KernelSimplicityRuleError(
                "`break` cannot be differentiated: the adjoint kernel cannot tell where the loop "
                "stopped", s.loc, hint="loop a fixed number of times and guard the body with "
                "an `if`, or keep this loop in a kernel that is not differentiated")
        # Store, AtomicOp and Return: the adjoint kernel writes no primal value.

    def _helper_var(self, key, sweep):
        name = sweep.names[key][0]
        return ir.Var(name, self.local_types[name])

    # ---- backward sweep -----------------------------------------------------------------------
    def backward(self, stmts, sweep: _Sweep) -> list:
        out = []
        for s in reversed(stmts):
            with B.at(s.loc):
                self.backward_stmt(s, sweep, out)
        return out

    def _restore_helpers(self, key, sweep, out):
        for name in reversed(sweep.names.get(key, [])):
            if (key, name) in sweep.saved:
                out.append(ir.Restore(name, B.current_loc()))

    def backward_stmt(self, s, sweep, out):
        if isinstance(s, ir.Assign):
            dtype = s.value.dtype
            g = None
            if dtype.is_float:
                adj = self.adj(s.name)
                if self.relevant(s.value):
                    g = self.temp(adj, out, "g")
                out.append(ir.Assign(adj.name, B.const(0, dtype), B.current_loc()))
            if id(s) in sweep.saved:
                out.append(ir.Restore(s.name, B.current_loc()))
            if g is not None:
                self.propagate(s.value, g, out)
        elif isinstance(s, ir.Store):
            grad = _grad_field(s.field)
            if grad is not None:
                g = self.temp(ir.Load(grad, s.indices, grad.dtype, s.loc), out, "g")
                out.append(ir.Store(grad, s.indices, B.const(0, grad.dtype), s.loc))
                self.propagate(s.value, g, out)
        elif isinstance(s, ir.AtomicOp):
            self.backward_atomic(s, out)
        elif isinstance(s, ir.If):
            then = self.backward(s.then, sweep)
            orelse = self.backward(s.orelse, sweep)
            cond = self._helper_var(id(s), sweep) if id(s) in sweep.names else s.cond
            out.append(ir.If(cond, tuple(then), tuple(orelse), s.loc))
            self._restore_helpers(id(s), sweep, out)
        elif isinstance(s, ir.For):
            if id(s) in self.own_regions:     # (a serial one in reverse, as stores may repeat)
                body = self.region(s.body, assigned=frozenset())
                out.append(ir.For(s.var, s.start, s.stop, tuple(body), s.parallel,
                                  not s.parallel, s.loc))
                return
            names = iter(sweep.names.get(id(s), []))
            start = s.start if isinstance(s.start, ir.Const) else self._var(next(names))
            stop = s.stop if isinstance(s.stop, ir.Const) else self._var(next(names))
            body = self.backward(s.body, sweep)
            out.append(ir.For(s.var, start, stop, tuple(body), False, True, s.loc))
            self._restore_helpers(id(s), sweep, out)
        elif isinstance(s, ir.While):
            count = self._helper_var(id(s), sweep)
            body = self.backward(s.body, sweep)
            step = self.namer.fresh("k")
            out.append(ir.For(step, B.const(0, T.i32), count, tuple(body), False, True, s.loc))
            self._restore_helpers(id(s), sweep, out)

    def _var(self, name):
        return ir.Var(name, self.local_types[name])

    def backward_atomic(self, s: ir.AtomicOp, out):
        grad = _grad_field(s.field)
        if grad is None or not self.relevant(s.value):
            return
        current = ir.Load(grad, s.indices, grad.dtype, s.loc)
        if s.op in ("add", "sub"):
            g = current if s.op == "add" else B.unary("neg", current)
            self.propagate(s.value, self.temp(g, out, "g"), out)
            return
        # min / max: only the value that won (equals the final element) receives the gradient,
        # and of tied winners only one: the winner takes the gradient and zeroes it in one atomic
        # step (min with 0 when it is positive, max with 0 when negative), so that tied lanes or
        # threads cannot each read it before one zeroes it.
        winner = []
        taken = self.namer.fresh("g")
        self.temps.add(taken)
        zero = B.const(0, grad.dtype)
        winner.append(ir.Assign(taken, zero, s.loc))
        winner.append(ir.If(B.binary("gt", current, zero),
                            (ir.AtomicOp("min", grad, s.indices, zero, taken, s.loc),),
                            (ir.AtomicOp("max", grad, s.indices, zero, taken, s.loc),), s.loc))
        self.propagate(s.value, ir.Var(taken, grad.dtype, s.loc), winner)
        final = ir.Load(s.field, s.indices, s.field.dtype, s.loc)
        out.append(ir.If(B.binary("eq", s.value, final), tuple(winner), (), s.loc))

    # ---- expressions ----------------------------------------------------------------------------
    def relevant(self, e: ir.Expr) -> bool:
        """Can a gradient flow from `e` to a float local or to a field with a gradient?"""
        return self.activity.active(e)

    def propagate(self, e: ir.Expr, g: ir.Expr, out: list):
        """Emit code adding g * d(e)/d(leaf) into the adjoint of every leaf of e."""
        if not self.relevant(e):
            return
        values: dict[int, ir.Expr] = {}
        self._recompute(e, values, out)
        self._push(e, g, values, out)

    def _recompute(self, e, values, out):
        """Bind the value of every relevant operation to a temp (post-order), once."""
        if not isinstance(e, ir.Op) or not self.relevant(e) or id(e) in values:
            return
        for a in e.args:
            if a.dtype.is_float:   # integer operands (conditions, indices) carry no gradient
                self._recompute(a, values, out)
        args = tuple(values.get(id(a), a) for a in e.args)
        values[id(e)] = self.temp(ir.Op(e.op, args, e.dtype, e.loc), out)

    def _push(self, e, g, values, out):
        if isinstance(e, ir.Var):
            adj = self.adj(e.name)
            out.append(ir.Assign(adj.name, B.binary("add", adj, g), B.current_loc()))
        elif isinstance(e, ir.Load):
            grad = _grad_field(e.field)
            out.append(ir.AtomicOp("add", grad, e.indices, B.cast(g, grad.dtype), None, e.loc))
        elif isinstance(e, ir.Op):
            args = tuple(values.get(id(a), a) for a in e.args)
            partials = TABLE[e.op].partials(args, values[id(e)])
            for arg, partial in zip(e.args, partials):
                if partial is None or not self.relevant(arg):
                    continue
                g_arg = B.cast(B.binary("mul", g, partial), arg.dtype)
                if isinstance(arg, ir.Op) and not isinstance(g_arg, (ir.Var, ir.Const)):
                    g_arg = self.temp(g_arg, out, "g")
                self._push(arg, g_arg, values, out)


def _grad_field(fld):
    return twin_of(fld, "grad")


def _assigned_in(stmts, skip: set) -> set:
    """Locals assigned in a block, not counting parallel loops handled as their own region."""
    names = set()
    for s in stmts:
        if isinstance(s, ir.Assign):
            names.add(s.name)
        elif isinstance(s, ir.For) and id(s) in skip:
            continue
        elif isinstance(s, ir.For):
            names.add(s.var)
        for inner in ir.child_blocks(s):
            names |= _assigned_in(inner, skip)
    return names


def _defined_before_read(stmts, names: set, defined: set) -> bool:
    """Is every read of one of `names` in `stmts` preceded, on every path, by its assignment?
    `defined` (assigned so far) grows with what the statements surely assign."""
    for s in stmts:
        read = {x.name for e in ir.stmt_exprs(s) for x in ir.walk_expr(e) if isinstance(x, ir.Var)}
        if (read & names) - defined:
            return False
        if isinstance(s, ir.Assign):
            defined.add(s.name)
        elif isinstance(s, ir.If):
            then, orelse = set(defined), set(defined)
            if not (_defined_before_read(s.then, names, then)
                    and _defined_before_read(s.orelse, names, orelse)):
                return False
            defined |= then & orelse
        elif isinstance(s, (ir.For, ir.While)):   # (what it assigns may never be: no iteration)
            own = {s.var} if isinstance(s, ir.For) else set()
            if not _defined_before_read(s.body, names, defined | own):
                return False
    return True


def _names_read_outside(stmts, loop) -> set:
    """The locals read by statements of `stmts` (nested ones too) that are not inside `loop`."""
    names = set()
    for s in stmts:
        if s is loop:
            continue
        names.update(x.name for e in ir.stmt_exprs(s) for x in ir.walk_expr(e)
                     if isinstance(x, ir.Var))
        for inner in ir.child_blocks(s):
            names |= _names_read_outside(inner, loop)
    return names


def _names_read(stmts) -> set:
    names = set()
    for s in ir.walk_stmts(stmts):
        for e in ir.stmt_exprs(s):
            names.update(x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var))
    return names


def _drop_saves(stmts, needed: set) -> list:
    out = []
    for s in stmts:
        if isinstance(s, (ir.Save, ir.Restore)) and s.name not in needed:
            continue
        out.append(ir.with_blocks(s, [_drop_saves(b, needed) for b in ir.child_blocks(s)]))
    return out


def eliminate_dead_code(body) -> list:
    """Drop locals whose values never reach a store, an atomic, a condition or a loop bound
    (with their saves and restores), then the loops and branches left empty. (The adjoint
    kernel writes no primal field, so its replay of a local nothing uses is useless; a running
    sum `acc = acc + ...` that only feeds itself is dead too.)"""
    while True:
        live = live_locals(body)
        dead = {s.name for s in ir.walk_stmts(body)
                if isinstance(s, (ir.Assign, ir.Save, ir.Restore)) and s.name not in live}
        new_body = _prune(body, dead)
        if new_body == list(body):
            return new_body
        body = new_body


def _prune(stmts, dead) -> list:
    out = []
    for s in stmts:
        if isinstance(s, (ir.Assign, ir.Save, ir.Restore)) and s.name in dead:
            continue
        blocks = [_prune(b, dead) for b in ir.child_blocks(s)]
        if isinstance(s, (ir.If, ir.For)) and not any(blocks):
            continue   # nothing left to do in it (a While still has to run its condition)
        out.append(ir.with_blocks(s, blocks))
    return out
