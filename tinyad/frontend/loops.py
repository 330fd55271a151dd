"""Frontend, loops: range-for, ndrange, struct-for, ti.grouped and ti.static unrolling."""
from __future__ import annotations

import ast
import builtins

from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import TinyadSyntaxError, TinyadTypeError
from tinyad.frontend import lang
from tinyad.frontend.matrix import Matrix
from tinyad.frontend.scope import rewrite_continues
from tinyad.frontend.structs import is_struct_field


def visit_For(self, node):
    """Dispatch on what is iterated: ti.static(...) unrolls, everything else is a run-time loop."""
    if node.orelse:
        self.unsupported(node, "for ... else")
    iter_node = node.iter
    if self.named_callee(iter_node) is builtins.range:
        bounds = [_range_bounds(self, iter_node)]
        return _emit_loop(self, node, bounds, grouped=False)
    iterable = self.visit(iter_node)
    if _is_static_iter(self, iter_node):
        return _unroll(self, node, iterable)
    grouped = isinstance(iterable, lang.grouped)
    source = iterable.iterable if grouped else iterable
    if ir.is_field(source) or is_struct_field(source):
        first = _offset_of(source) or (0,) * len(source.shape)
        bounds = [(o, o + extent) for o, extent in zip(first, source.shape)]
    elif isinstance(source, lang.ndrange):
        bounds = [(B.cast(a, T.i32) if B.is_expr(a) else a, B.cast(b, T.i32) if B.is_expr(b) else b)
                  for a, b in source.bounds]
    elif isinstance(source, (list, tuple, range)) or isinstance(source, Matrix):
        raise TinyadSyntaxError("a loop over a Python sequence must be unrolled explicitly",
                                self.loc(iter_node),
                                hint="write `for v in ti.static(...)`")
    else:
        raise TinyadSyntaxError(f"cannot loop over {type(source).__name__}", self.loc(iter_node),
                                hint="loop over range(...), ti.ndrange(...), a field, or "
                                     "ti.static(...)")
    return _emit_loop(self, node, bounds, grouped)


def _offset_of(source):
    """A field's offset= (its first index per axis), or None; a struct field's, its members'."""
    if is_struct_field(source):
        return _offset_of(next(iter(source.members.values())))
    return getattr(source, "offset", None)


def _is_static_iter(self, iter_node) -> bool:
    return self.named_callee(iter_node) is lang.static


def _range_bounds(self, call):
    args = [self.visit(a) for a in call.args]
    if len(args) == 3:
        if B.is_expr(args[2]) or args[2] != 1:
            raise TinyadSyntaxError("range() with a step is not supported in kernel loops",
                                    self.loc(call), hint="loop over range(n) and compute "
                                    "start + k * step")
        args = args[:2]
    if not 1 <= len(args) <= 2:
        raise TinyadSyntaxError("range() takes 1 or 2 arguments here", self.loc(call))
    start, stop = (0, args[0]) if len(args) == 1 else args
    for bound in (start, stop):
        if isinstance(bound, float) or (B.is_expr(bound) and bound.dtype.is_float):
            raise TinyadTypeError("range() bounds must be integers", self.loc(call),
                                  hint="convert with int(...) or ti.cast(..., ti.i32)")
        if not (B.is_expr(bound) or isinstance(bound, int) or hasattr(bound, "__index__")):
            raise TinyadTypeError(f"range() bound {bound!r} is not an integer", self.loc(call))
    return start, stop


def _targets(node):
    target = node.target
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(t, ast.Name) for t in target.elts):
        return [t.id for t in target.elts]
    return None


def _emit_loop(self, node, bounds, grouped):
    names = _targets(node)
    if names is None:
        raise TinyadSyntaxError("loop targets must be plain names", self.loc(node.target))
    if grouped and len(names) != 1:
        raise TinyadSyntaxError("ti.grouped(...) loops bind one vector index", self.loc(node.target))
    if not grouped and len(names) != len(bounds):
        raise TinyadSyntaxError(f"this loop has {len(bounds)} dimension(s) but {len(names)} "
                                "index name(s)", self.loc(node.target),
                                hint=f"write `for {', '.join('ijkl'[:len(bounds)])} in ...`"
                                     " or loop over ti.grouped(...)")
    loc = self.loc(node)
    parallel = self.frame.is_kernel and self.dynamic_depth == 0 and not self.pending_serialize
    self.pending_serialize = False
    base = names[0] if len(bounds) == 1 and not grouped else "I"
    loop_var = self.namer.fresh(base)
    if len(bounds) == 1:
        start, stop = bounds[0]
        index_exprs = [ir.Var(loop_var, T.i32, loc)]
        prelude = []
    else:
        start, stop, index_exprs, prelude = _flatten(self, bounds, loop_var, loc)
    self.loops.append(parallel)
    with self.block() as body:
        body.extend(prelude)
        if grouped:
            self.frame.scopes[-1][names[0]] = Matrix(index_exprs)
        else:
            for name, expr in zip(names, index_exprs):
                self.frame.scopes[-1][name] = expr
        self.visit_block(loop_body(self, node))
    self.loops.pop()
    self.emit(ir.For(loop_var, B.cast(B.as_expr(start), T.i32), B.cast(B.as_expr(stop), T.i32),
                     tuple(body), parallel, False, loc))


def fill_loop(self, fld, value, node):
    """`x.fill(v)` in a kernel, as Taichi allows: a loop storing v into every element of x,
    parallel where a loop written there would be; v is computed once, before it."""
    loc = self.loc(node)
    with B.at(loc):
        value = self.snapshot(value)
    first = _offset_of(fld) or (0,) * len(fld.shape)
    bounds = [(o, o + extent) for o, extent in zip(first, fld.shape)]
    parallel = self.frame.is_kernel and self.dynamic_depth == 0
    loop_var = self.namer.fresh("I")
    if len(bounds) == 1:
        (start, stop), index, prelude = bounds[0], [ir.Var(loop_var, T.i32, loc)], []
    else:
        start, stop, index, prelude = _flatten(self, bounds, loop_var, loc)
    with self.block() as body:
        body.extend(prelude)
        self.assign(self.field_lvalue(fld, tuple(index)), value, node)
    self.emit(ir.For(loop_var, B.cast(B.as_expr(start), T.i32), B.cast(B.as_expr(stop), T.i32),
                     tuple(body), parallel, False, loc))


def _flatten(self, bounds, loop_var, loc):
    """One flat loop over an n-d box; the indices are recovered with // and %. A 0-d box (a
    0-D field under ti.grouped) is one iteration with an empty index."""
    if not bounds:
        return 0, 1, [], []
    # an empty axis (stop <= start) empties the box, however many other axes are empty too
    extents = [B.binary("max", B.binary("sub", stop, start), 0) for start, stop in bounds]
    total = extents[0]
    for e in extents[1:]:
        total = B.binary("mul", total, e)
    flat = ir.Var(loop_var, T.i32, loc)
    prelude, index_exprs = [], []
    stride = 1
    strides = []
    for e in reversed(extents):
        strides.append(stride)
        stride = B.binary("mul", stride, e)
    strides.reverse()
    for k, ((start, _), extent, step) in enumerate(zip(bounds, extents, strides)):
        value = B.binary("floordiv", flat, step) if not (isinstance(step, int) and step == 1) else flat
        if k > 0:
            value = B.binary("mod", value, extent)
        value = B.binary("add", value, start)
        name = self.namer.fresh("ijkl"[k] if k < 4 else f"i{k}")
        prelude.append(ir.Assign(name, B.cast(value, T.i32), loc))
        index_exprs.append(ir.Var(name, T.i32, loc))
    return 0, total, index_exprs, prelude


def loop_body(self, node) -> list:
    """The loop's body, with its `continue`s turned into a flag (frontend/scope.py)."""
    return rewrite_continues(node.body, self.namer.fresh("continued"))


def _unroll(self, node, iterable):
    if B.is_expr(iterable):
        raise TinyadSyntaxError("ti.static() loops need a range known at trace time",
                                self.loc(node.iter))
    for item in iterable:
        with self.block(dynamic=False) as body:
            self.bind_static_target(node.target, item)
            self.visit_block(loop_body(self, node))
        self.blocks[-1].extend(body)


def bind_static_target(self, target, item):
    scope = self.frame.scopes[-1]
    if isinstance(target, ast.Name):
        scope[target.id] = item
        return
    if isinstance(target, (ast.Tuple, ast.List)):
        items = item.entries if isinstance(item, Matrix) else list(item)
        if len(items) != len(target.elts):
            raise TinyadSyntaxError(f"cannot unpack {len(items)} values into "
                                    f"{len(target.elts)} names", self.loc(target))
        for t, v in zip(target.elts, items):
            bind_static_target(self, t, v)
        return
    raise TinyadSyntaxError("static loop targets must be names", self.loc(target))
