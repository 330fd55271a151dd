"""Forward-mode autodiff as an IR -> IR transform: a kernel -> its tangent ("fwd") kernel.

The tangent kernel computes the primal values AND their tangents in one pass (as Taichi's
forward mode does): every active local `x` gets a tangent local `x_dot`, every field `f` the
tangents in `f.dual`. An operation's tangent comes from the op table's rule
(tinyad/core/ops.py): the sum over its active arguments of partial * arg_dot, or the op's `jvp`
where that sum is wrong. Arguments that carry no tangent are skipped, so an inactive argument's
infinite partial cannot poison the sum. There is no replay and no backward sweep: the tangent
flows in program order, next to the value it belongs to.

The statements of both transforms, side by side (e' is the tangent of e, g the adjoint):

    statement           forward mode (this module)          reverse mode (reverse.py)
    x = e               x_dot = e'; x = e                   g = x_adj; x_adj = 0; e receives g
    f[i] = e            f.dual[i] = e'  (sets; Taichi adds) g = f.grad[i]; f.grad[i] = 0; ...
    f[i] += e           f.dual[i] += e'                     e receives f.grad[i]
    f[i] -= e           f.dual[i] -= e'                     e receives -f.grad[i]
    atomic_max(f[i],e)  after it: if f[i] == e:             if e == f[i] (e won): e receives
                            f.dual[i] = e'  (winner's)          f.grad[i]; f.grad[i] = 0
    if c: A else: B     if c: A' else: B'                   replay c, then B-bar / A-bar
    for i in range:     the same loop over A'               replayed forward, then reversed
    while c: A          while c: A'                         counted, then a reversed for
    save x / restore x  also save / restore x_dot           (adjoint kernels only)

A store into a field without a `.dual` of a value that carries a tangent drops the tangent
(Taichi does so silently): the transform lists each such store in `dropped`, and the rule
checker reports it when the kernel runs in forward mode (tinyad/check/rules.py).
"""
from __future__ import annotations

from tinyad.autodiff.activity import Activity, twin_of
from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core.names import Namer
from tinyad.core.ops import TABLE
from tinyad.core.wellformed import check_wellformed


def forward(kernel: ir.Kernel, notes: list | None = None,
            dropped: list | None = None) -> ir.Kernel:
    """The tangent kernel of `kernel` (same arguments and return value). Non-differentiable
    operations met on a tangent path are appended to `notes` as (loc, op); stores that drop a
    tangent (the field has no .dual) to `dropped` as (field, loc)."""
    transform = _Forward(kernel)
    body = transform.declare_argument_tangents() + transform.block(kernel.body)
    if notes is not None:
        notes.extend(transform.activity.notes)
    if dropped is not None:
        dropped.extend(transform.dropped)
    return check_wellformed(ir.Kernel(f"{kernel.name}_fwd", kernel.args, tuple(body),
                                      kernel.ret, kernel.loc))


def forward_block(stmts, seeds: dict, namer: Namer):
    """The tangent statements of a block of a kernel being traced (a function's body), in which
    only the locals in `seeds` are active (ir.Var -> the expression of its tangent): field
    loads are constants here, as a function's reads of globals are to its derivative. `namer`
    is the enclosing kernel's, so the tangent locals cannot collide with its names.
    -> (statements, tangent_of, notes): tangent_of(name) is a local's tangent after the block
    (a constant 0 where it carries none); notes lists the non-differentiable operations met on
    a tangent path, as (loc, op)."""
    pseudo = ir.Kernel("block", tuple(ir.Arg(v.name, v.dtype) for v in seeds), tuple(stmts))
    transform = _Forward(pseudo, twin=None, seeds={v.name for v in seeds}, namer=namer)
    body = [ir.Assign(transform.dot(v.name).name, B.cast(tangent, v.dtype), B.current_loc())
            for v, tangent in seeds.items()]
    body += transform.block(stmts)

    def tangent_of(name: str) -> ir.Expr:
        if transform.has_dot(name):
            return transform.dot(name)
        return B.const(0, transform.local_types[name])
    return body, tangent_of, transform.activity.notes


def product_jvp(spec, args, out, dots):
    """sum_k partial_k * dots[k] over the arguments that carry a tangent (None: no term)."""
    total = None
    for partial, dot in zip(spec.partials(args, out), dots):
        if partial is None or dot is None:
            continue
        term = B.binary("mul", partial, dot)
        total = term if total is None else B.binary("add", total, term)
    return total


def _mentions(e: ir.Expr, node: ir.Expr) -> bool:
    return any(x is node for x in ir.walk_expr(e))


class _Forward:
    def __init__(self, kernel: ir.Kernel, twin: str | None = "dual", seeds=(),
                 namer: Namer | None = None):
        self.kernel = kernel
        self.twin = twin               # None: no field carries a tangent (forward_block)
        self.activity = Activity.of_kernel(kernel, twin, seeds)
        self.local_types = ir.local_types(kernel)
        self.namer = namer or Namer()
        self.namer.used.update(self.local_types)
        self.dot_names: dict[str, str] = {}
        self.dropped: list = []        # (field, loc): tangents lost to a field without .dual

    # ---- names ------------------------------------------------------------------------------
    def dot(self, name: str) -> ir.Var:
        if name not in self.dot_names:
            self.dot_names[name] = self.namer.fresh(f"{name}_dot")
        return ir.Var(self.dot_names[name], self.local_types[name], B.current_loc())

    def has_dot(self, name: str) -> bool:
        return self.local_types[name].is_float and self.activity.local_active(name)

    def temp(self, value: ir.Expr, out: list, base: str) -> ir.Expr:
        if isinstance(value, (ir.Var, ir.Const)):
            return value
        name = self.namer.fresh(base)
        out.append(ir.Assign(name, value, B.current_loc()))
        return ir.Var(name, value.dtype, B.current_loc())

    def declare_argument_tangents(self) -> list:
        """An argument reassigned from a tangent-carrying value starts with tangent 0."""
        with B.at(self.kernel.loc):
            return [ir.Assign(self.dot(a.name).name, B.const(0, a.dtype), self.kernel.loc)
                    for a in self.kernel.args if self.has_dot(a.name)]

    # ---- statements -----------------------------------------------------------------------------
    def block(self, stmts) -> list:
        out: list = []
        for s in stmts:
            with B.at(s.loc):
                self.stmt(s, out)
        return out

    def stmt(self, s, out):
        if isinstance(s, ir.Assign):
            if not self.has_dot(s.name):
                out.append(s)
                return
            value, tangent = self.tangent(s.value, out)
            out.append(ir.Assign(self.dot(s.name).name, self.as_tangent(tangent, s.value.dtype),
                                 s.loc))
            out.append(ir.Assign(s.name, value, s.loc))
        elif isinstance(s, ir.Store):
            value, tangent = self.tangent(s.value, out)
            dual = self.dual_for(s.field, tangent, s.loc)
            if dual is not None:
                out.append(ir.Store(dual, s.indices, self.as_tangent(tangent, dual.dtype), s.loc))
            out.append(ir.Store(s.field, s.indices, value, s.loc))
        elif isinstance(s, ir.AtomicOp):
            self.atomic(s, out)
        elif isinstance(s, ir.If):
            out.append(ir.If(s.cond, tuple(self.block(s.then)), tuple(self.block(s.orelse)),
                             s.loc))
        elif isinstance(s, ir.For):
            out.append(ir.For(s.var, s.start, s.stop, tuple(self.block(s.body)), s.parallel,
                              s.reverse, s.loc))
        elif isinstance(s, ir.While):
            out.append(ir.While(s.cond, tuple(self.block(s.body)), s.loc))
        elif isinstance(s, (ir.Save, ir.Restore)):
            out.append(s)
            if self.has_dot(s.name):       # a local's tangent travels with its value
                out.append(type(s)(self.dot(s.name).name, s.loc))
        else:                               # Break, Return: the primal's own
            out.append(s)

    def atomic(self, s: ir.AtomicOp, out):
        value, tangent = self.tangent(s.value, out)
        dual = self.dual_for(s.field, tangent, s.loc)
        result_dot = (self.dot(s.result).name
                      if s.result is not None and self.has_dot(s.result) else None)
        if s.op in ("add", "sub"):
            if dual is not None and (tangent is not None or result_dot is not None):
                out.append(ir.AtomicOp(s.op, dual, s.indices, self.as_tangent(tangent, dual.dtype),
                                       result_dot, s.loc))
            out.append(ir.AtomicOp(s.op, s.field, s.indices, value, s.result, s.loc))
            return
        # min / max: the element's tangent becomes the winner's (Taichi leaves it unchanged)
        if dual is None:
            out.append(ir.AtomicOp(s.op, s.field, s.indices, value, s.result, s.loc))
            return
        value = self.temp(value, out, "v")
        if result_dot is not None:
            out.append(ir.Assign(result_dot, ir.Load(dual, s.indices, dual.dtype, s.loc), s.loc))
        out.append(ir.AtomicOp(s.op, s.field, s.indices, value, s.result, s.loc))
        won = B.binary("eq", ir.Load(s.field, s.indices, s.field.dtype, s.loc), value)
        set_dual = ir.Store(dual, s.indices, self.as_tangent(tangent, dual.dtype), s.loc)
        out.append(ir.If(won, (set_dual,), (), s.loc))

    def dual_for(self, fld, tangent, loc):
        """The field's .dual, or None; a tangent stored into a field without one is dropped."""
        dual = twin_of(fld, self.twin)
        if dual is None and tangent is not None:
            self.dropped.append((fld, loc))
        return dual

    @staticmethod
    def as_tangent(tangent, dtype):
        return B.cast(0 if tangent is None else tangent, dtype)

    # ---- expressions ----------------------------------------------------------------------------
    def tangent(self, e: ir.Expr, out: list, root: bool = True):
        """-> (an expression for e's value, e's tangent or None). Each active operation below
        the root has its value and tangent bound to locals (post-order), so each is computed
        once; the root's stay expressions, for the statement to use."""
        if not self.activity.active(e):
            return e, None
        if isinstance(e, ir.Var):
            return e, self.dot(e.name)
        if isinstance(e, ir.Load):
            dual = twin_of(e.field, self.twin)
            return e, B.cast(ir.Load(dual, e.indices, dual.dtype, e.loc), e.dtype)
        # integer operands (conditions, indices) carry no tangent: not even asked, so a
        # comparison is not noted as a cut derivative path
        pairs = [self.tangent(a, out, root=False) if a.dtype.is_float else (a, None)
                 for a in e.args]
        args = tuple(value for value, _ in pairs)
        dots = tuple(dot for _, dot in pairs)
        value = ir.Op(e.op, args, e.dtype, e.loc)
        if not root:
            value = self.temp(value, out, "t")
        spec = TABLE[e.op]
        rule = spec.jvp if spec.jvp is not None else lambda *a: product_jvp(spec, *a)
        dot = rule(args, value, dots)
        if dot is None:
            return value, None
        if root and _mentions(dot, value):
            # the rule reuses the result (exp, rsqrt, x / y): compute it once, not again
            # inside the tangent (LLVM does not always merge the copies: sqrt, pow calls)
            value = self.temp(value, out, "t")
            dot = rule(args, value, dots)
        dot = B.cast(dot, e.dtype)
        return value, dot if root else self.temp(dot, out, "d")
