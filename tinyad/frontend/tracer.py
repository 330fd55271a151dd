"""Frontend: a Python kernel -> tinyad IR.

The Tracer walks the kernel's Python AST once, with one visit_X per supported construct; anything
else is rejected with a TinyadSyntaxError at the user's line. While walking it evaluates what is
known at trace time (ti.static, closures, constants), unrolls vectors and matrices into scalars,
and inlines @ti.func calls, so the IR it emits only has scalar statements.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import numbers
import warnings

import numpy as np

from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import (
    KernelSimplicityRuleError,
    TinyadError,
    TinyadSyntaxError,
    TinyadTypeError,
)
from tinyad.core.names import Namer
from tinyad.frontend import lang
from tinyad.frontend.atomics import atomic_update, trace_atomic_call
from tinyad.frontend.exprs import ExprVisitor, is_traced
from tinyad.frontend.fill import fills_a_matrix, trace_fill
from tinyad.frontend.lvalues import FieldRef, LocalRef, LValue
from tinyad.frontend.matrix import Matrix, entry_dtype
from tinyad.frontend.printing import trace_assert
from tinyad.frontend.pycalls import trace_failure
from tinyad.frontend.scope import (
    FunctionFrame,
    LocalMatrix,
    Source,
    assigned_names,
    check_tail_returns,
    guard_loop_returns,
    is_leaf,
    rewrite_early_returns,
)
from tinyad.frontend.signature import (
    eval_annotation,
    parameter_kinds,
    resolve_annotation,
)
from tinyad.frontend.structlvalues import StructLValue
from tinyad.frontend.structs import Struct, StructRef, StructType, is_struct_field, snapshot_struct

STOP_GRAD_KEY = "$stop_grad"   # scope entry: fields whose loads carry no gradient here
MAX_INLINE_DEPTH = 64


class Tracer(ExprVisitor):
    def __init__(self):
        self.namer = Namer()
        self.blocks: list[list] = []
        self.frames: list[FunctionFrame] = []
        self.dynamic_depth = 0        # enclosing run-time loops and ifs in the kernel body
        self.loops: list[bool] = []   # enclosing run-time loops: parallel or not
        self.pending_serialize = False
        self.kernel_ret = None

    # ---- plumbing ---------------------------------------------------------------------------
    @property
    def frame(self) -> FunctionFrame:
        return self.frames[-1]

    def loc(self, node):
        return self.frame.source.loc(node)

    def visit(self, node):
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            self.unsupported(node)
        with B.at(self.loc(node)):
            try:
                return method(node)
            except TinyadError:
                raise
            except RecursionError:
                raise TinyadSyntaxError("expression nesting too deep", self.loc(node)) from None
            except Exception as exc:  # noqa: BLE001  (not a tinyad error: whose fault is it?)
                raise trace_failure(exc, self.loc(node)) from exc

    def emit(self, stmt):
        self.blocks[-1].append(stmt)

    def new_local(self, value, base):
        """B.local's sink: `value` in a fresh local of the current block."""
        var = ir.Var(self.namer.fresh(base), value.dtype, B.current_loc())
        self.emit(ir.Assign(var.name, value, var.loc))
        return var

    @contextlib.contextmanager
    def block(self, dynamic=True):
        self.blocks.append([])
        self.frame.scopes.append({})
        if dynamic:
            self.dynamic_depth += 1
        try:
            yield self.blocks[-1]
        finally:
            if dynamic:
                self.dynamic_depth -= 1
            self.frame.scopes.pop()
            self.blocks.pop()

    def visit_block(self, stmts):
        for stmt in stmts:
            self.visit(stmt)

    def stopped_fields(self):
        out = set()
        for frame in self.frames:
            for scope in frame.scopes:
                out |= scope.get(STOP_GRAD_KEY, set())
        return out

    # ---- declaring and assigning locals ------------------------------------------------------
    def declare(self, name: str, value, node, dtype=None):
        """Bind a new name in the innermost scope; kernel values get fresh IR locals."""
        scope = self.frame.scopes[-1]
        if isinstance(value, (Struct, StructRef)):   # a struct value: its members copied
            scope[name] = snapshot_struct(self, value)
            return
        if isinstance(value, Matrix):
            common = dtype or entry_dtype(value.entries) or B.python_dtype(value.entries[0])
            for e in value.entries:
                if not B.is_expr(e):
                    common = T.promote(common, B.python_dtype(e)) if dtype is None else common
            names = [self.namer.fresh(f"{name}_{k}") for k in range(len(value.entries))]
            variables = [ir.Var(n, common, self.loc(node)) for n in names]
            for var, entry in zip(variables, value.entries):
                self.emit(ir.Assign(var.name, B.cast(entry, common), self.loc(node)))
            scope[name] = LocalMatrix(variables, value.n, value.m, value.ndim)
        elif B.is_expr(value) or isinstance(value, (numbers.Number, np.generic)) and dtype is None \
                or dtype is not None:
            if not B.is_expr(value) and not isinstance(value, (numbers.Number, np.generic)):
                raise TinyadTypeError(f"cannot store {type(value).__name__} in a {dtype} local",
                                      self.loc(node))
            dtype = dtype or (value.dtype if B.is_expr(value) else B.python_dtype(value))
            var = ir.Var(self.namer.fresh(name), dtype, self.loc(node))
            self.emit(ir.Assign(var.name, self.coerce(value, dtype, node), self.loc(node)))
            scope[name] = var
        else:
            scope[name] = value   # a Python object (field, function, tuple): known at trace time

    def coerce(self, value, dtype, node):
        """Convert a value for storing into a `dtype` slot, warning where Taichi warns."""
        if isinstance(value, Matrix):
            raise TinyadTypeError(f"cannot store a {value.shape} matrix in a scalar",
                                  self.loc(node), hint="pick one entry (v[0]), reduce it (v.sum()), or use a "
                                       "vector local or field")
        if not B.is_expr(value) and not isinstance(value, (numbers.Number, np.generic)):
            raise TinyadTypeError(f"cannot store {type(value).__name__} {value!r} in a kernel "
                                  "variable", self.loc(node), hint="kernel variables hold numbers, "
                                  "vectors and matrices")
        source_dtype = value.dtype if B.is_expr(value) else B.python_dtype(value)
        if T.loses_precision(dtype, source_dtype) and not isinstance(value, ir.Const):
            loc = self.loc(node)
            warnings.warn_explicit(f"Local store may lose precision: {dtype} <- {source_dtype}",
                                   UserWarning, loc.file, loc.line)
        return B.cast(value, dtype)

    def lvalue(self, node) -> LValue:
        if isinstance(node, ast.Name):
            binding = self.frame.lookup(node.id, self.loc(node))
            if isinstance(binding, ir.Var):
                return LValue([LocalRef(binding)], ())
            if isinstance(binding, LocalMatrix):
                shape = (binding.n,) if binding.ndim == 1 else (binding.n, binding.m)
                return LValue([LocalRef(v) for v in binding.vars], shape)
            raise TinyadSyntaxError(f"'{node.id}' is a trace-time value and cannot be assigned "
                                    "here", self.loc(node), hint="assign to a new variable name")
        if isinstance(node, ast.Subscript):
            base = self.visit(node.value) if not isinstance(node.value, (ast.Name, ast.Subscript,
                                                                         ast.Attribute)) else None
            target = base if base is not None else self._lvalue_or_field(node.value)
            if is_struct_field(target):                    # s[i] = struct value
                return self.struct_lvalue(StructRef(self, target, self.subscript_key(node), node))
            if ir.is_field(target):
                indices = self.field_indices(target, self.subscript_key(node), node)
                comps = ([()] if not target.element_shape else
                         [c for c in np.ndindex(*target.element_shape)])
                slots = [FieldRef(target, indices + tuple(B.const(c, T.i32) for c in comp))
                         for comp in comps]
                return LValue(slots, target.element_shape)
            return target.pick(self.visit(node.slice), self.loc(node))
        if isinstance(node, ast.Attribute):
            base = self.visit(node.value)
            if isinstance(base, (Struct, StructRef)):      # s[i].a = ..., p.a = ...
                return self.struct_member_lvalue(base, node.attr, node)
        if isinstance(node, ast.Attribute) and node.attr in "xyzw" and len(node.attr) == 1:
            base = self._lvalue_or_field(node.value)
            if isinstance(base, LValue):
                return base.pick("xyzw".index(node.attr), self.loc(node))
        raise TinyadSyntaxError(f"cannot assign to `{ast.unparse(node)}`", self.loc(node))

    # struct targets: methods written in frontend/structlvalues.py
    from tinyad.frontend.structlvalues import (  # noqa: E402, I001
        assign_struct, struct_lvalue, struct_member_lvalue)

    def field_lvalue(self, fld, indices) -> LValue:
        """The slots of the element of `fld` at `indices` (each component of a vector one)."""
        comps = [()] if not fld.element_shape else list(np.ndindex(*fld.element_shape))
        return LValue([FieldRef(fld, indices + tuple(B.const(c, T.i32) for c in comp))
                       for comp in comps], fld.element_shape)

    def _lvalue_or_field(self, node):
        if isinstance(node, (ast.Name, ast.Attribute)) or self._in_python_container(node):
            value = self.frame.lookup(node.id, self.loc(node)) if isinstance(node, ast.Name) \
                else self.visit(node)
            if ir.is_field(value) or is_struct_field(value):
                return value
        return self.lvalue(node)

    def _in_python_container(self, node) -> bool:
        """`fields["a"]`, `pair[0]`: a subscript of a Python object (dict, list, tuple) that
        the trace evaluates, not a kernel local."""
        root = node
        while isinstance(root, ast.Subscript):
            root = root.value
        if root is node or not isinstance(root, ast.Name):
            return False
        binding = self.frame.lookup(root.id, self.loc(root))
        return isinstance(binding, (dict, list, tuple))

    def read_slot(self, slot):
        if isinstance(slot, LocalRef):
            return slot.var
        if isinstance(slot, FieldRef):
            return ir.Load(slot.field, slot.indices, slot.field.dtype, B.current_loc())
        from tinyad.frontend.matrix import _dynamic_pick  # noqa: PLC0415
        return _dynamic_pick(slot.index, [self.read_slot(s) for s in slot.slots])

    def write_slot(self, slot, value, node):
        loc = self.loc(node)
        if isinstance(slot, LocalRef):
            self.emit(ir.Assign(slot.var.name, self.coerce(value, slot.var.dtype, node), loc))
        elif isinstance(slot, FieldRef):
            if isinstance(value, Matrix) or not (B.is_expr(value) or isinstance(value, (numbers.Number, np.generic))):
                raise TinyadTypeError(f"cannot store {type(value).__name__} in an element of "
                                      f"field {slot.field.name}", loc, hint=_shape_hint(slot.field))
            self.emit(ir.Store(slot.field, slot.indices, B.cast(value, slot.field.dtype), loc))
        else:  # a run-time index: every candidate keeps its value unless it is the one picked
            for k, candidate in enumerate(slot.slots):
                hit = B.binary("eq", slot.index, k)
                self.write_slot(candidate, B.select(hit, value, self.read_slot(candidate)), node)

    def snapshot(self, value):
        """`value` as it is now: a kernel value that later stores could change (a local, a
        field element, an expression of them) is copied into a fresh local."""
        if isinstance(value, Matrix):
            return value.map(self.snapshot)
        if B.is_expr(value) and not isinstance(value, ir.Const):
            return self.new_local(value, "t")
        return value

    def assign(self, lv: LValue, value, node):
        if isinstance(lv, StructLValue):
            return self.assign_struct(lv, value, node)
        values = self.evaluated_first(self.spread(value, lv, node), lv, node)
        for slot, v in zip(lv.slots, values):
            self.write_slot(slot, v, node)

    def evaluated_first(self, values, lv: LValue, node):
        """Python evaluates a right-hand side before it assigns. Where an entry of it reads the
        target (`v = R @ v`, `g[i] -= g[i].dot(n) * n`), writing the target entry by entry let
        the later entries see the earlier new ones: those values go to fresh locals first."""
        if len(lv.slots) < 2 or not _reads_any(values, lv.slots):
            return values
        with B.at(self.loc(node)):
            return [self.snapshot(v) for v in values]

    def spread(self, value, lv: LValue, node):
        """The scalars to write into each slot of `lv` (a matrix must match its shape)."""
        if isinstance(value, (list, tuple)) and lv.shape:
            value = Matrix(list(value))
        if isinstance(value, Matrix):
            if value.shape != lv.shape and not (len(value.entries) == len(lv.slots) and
                                               lv.shape and lv.shape[0] == len(lv.slots)):
                raise TinyadTypeError(f"cannot assign a {value.shape} value to a {lv.shape} "
                                      "target", self.loc(node), hint="a variable keeps its shape: "
                                      "assign a value of the same shape, or use a new name")
            return value.entries
        return [value] * len(lv.slots)

    def named_callee(self, node):
        """What `node` calls, where that is a dotted name (`ti.static`, `range`, `f`), else
        None: looking a name up twice is harmless, but a callee computed by a call
        (`f(x).sum()`) would trace that call, and its stores, a second time."""
        if not isinstance(node, ast.Call):
            return None
        name = node.func
        while isinstance(name, ast.Attribute):
            name = name.value
        return self.visit(node.func) if isinstance(name, ast.Name) else None

    # ---- statements -------------------------------------------------------------------------
    def visit_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        call = node.value
        if isinstance(call, ast.Call):
            if fills_a_matrix(self, call):     # x[i].fill(0.0) (frontend/fill.py)
                trace_fill(self, call)
                return
            fn = self.named_callee(call)
            if fn in lang.ATOMICS:  # a statement: the old value is not needed
                with B.at(self.loc(call)):
                    self.atomic_call(lang.ATOMICS[fn], call, want_result=False)
                return
        self.visit(node.value)

    def visit_Pass(self, node):
        pass

    def visit_Assign(self, node):
        value = self.visit(node.value)
        static = _is_static_call(node.value, self)
        if len(node.targets) > 1 and is_traced(value):
            with B.at(self.loc(node)):     # `a = b = a + b`: b gets the value a got, not
                value = self.snapshot(value)   # one computed again from the new a
        for target in node.targets:
            self.assign_to(target, value, node, static)

    def assign_to(self, target, value, node, static=False):
        if isinstance(target, (ast.Tuple, ast.List)):
            items = value.entries if isinstance(value, Matrix) and value.ndim == 1 else \
                (list(value) if isinstance(value, Matrix) else value)
            if is_traced(items) or not hasattr(items, "__len__") or len(items) != len(target.elts):
                raise TinyadSyntaxError(f"cannot unpack this value into {len(target.elts)} names",
                                        self.loc(node), hint="unpack as many names as the value "
                                        "has entries, or index it: v[0], v[1]")
            # Python evaluates every right-hand side before it assigns (`p, q = q, p + q`):
            # keep each kernel value in a fresh local first, so no target sees an earlier one.
            with B.at(self.loc(node)):
                items = [self.snapshot(v) for v in items]
            for t, v in zip(target.elts, items):
                self.assign_to(t, v, node, static)
            return
        if isinstance(target, ast.Name):
            scope = self.frame.find_scope(target.id)
            if scope is None or not isinstance(scope[target.id], (ir.Var, LocalMatrix)):
                if scope is not None and is_traced(value) and scope is not self.frame.scopes[-1]:
                    raise TinyadSyntaxError(f"'{target.id}' holds a trace-time value from an outer "
                                            "block; give the kernel value a new name",
                                            self.loc(node))
                if static:
                    self.frame.scopes[-1][target.id] = value
                else:
                    self.declare(target.id, value, node)
                return
        self.assign(self.lvalue(target), value, node)

    def visit_AnnAssign(self, node):
        if node.value is None or not isinstance(node.target, ast.Name):
            self.unsupported(node, "annotations without a value")
        kind = resolve_annotation(self.visit(node.annotation))
        value = self.visit(node.value)
        if isinstance(kind, (lang.VectorType, lang.MatrixType)):
            value = value if isinstance(value, Matrix) else Matrix(value)
            self.declare(node.target.id, value, node, T.resolve_dtype(kind.dtype) if kind.dtype else None)
        elif kind == "template":
            self.frame.scopes[-1][node.target.id] = value
        else:
            self.declare(node.target.id, value, node, kind)

    def visit_AugAssign(self, node):
        name, _ = _binop_name(node)
        lv = self.lvalue(node.target)
        values = self.evaluated_first(self.spread(self.visit(node.value), lv, node), lv, node)
        for slot, v in zip(lv.slots, values):
            if isinstance(slot, FieldRef) and atomic_update(name, slot.field, v):
                value = B.cast(v, slot.field.dtype)
                self.emit(ir.AtomicOp(name, slot.field, slot.indices, value, None, self.loc(node)))
            else:
                with B.at(self.loc(node.target)):   # the read is the target's, not the line's
                    current = self.read_slot(slot)
                self.write_slot(slot, B.binary(name, current, v), node)

    def atomic_call(self, op, node, want_result=True):
        return trace_atomic_call(self, op, node, want_result)

    def stop_grad_call(self, node):
        value = self.visit(node.args[0])
        if ir.is_field(value):  # ti.stop_grad(x): later loads of x here pass no gradient
            self.frame.scopes[-1].setdefault(STOP_GRAD_KEY, set()).add(value)
            return None
        return lang.stop_grad(value)

    def visit_If(self, node):
        cond = self.visit(node.test)
        if isinstance(cond, Matrix):
            raise TinyadTypeError("`if` on a vector", self.loc(node.test),
                                  hint="reduce it to one value first, e.g. with .all(), .any() "
                                       "or .sum()")
        if not B.is_expr(cond):  # known at trace time: only the taken branch exists
            with self.block(dynamic=False) as taken:
                self.visit_block(node.body if cond else node.orelse)
            self.blocks[-1].extend(taken)
            return
        with self.block() as then:
            self.visit_block(node.body)
        with self.block() as orelse:
            self.visit_block(node.orelse)
        self.emit(ir.If(cond, tuple(then), tuple(orelse), self.loc(node)))

    def visit_While(self, node):
        if node.orelse:
            self.unsupported(node, "while ... else")
        with B.local_sink(None):  # the condition is re-evaluated: no locals set before the loop
            cond = self.visit(node.test)
        if isinstance(cond, Matrix) or not (B.is_expr(cond) or cond):
            if isinstance(cond, Matrix):
                raise TinyadTypeError("`while` on a vector", self.loc(node.test),
                                      hint="reduce it to one value first, e.g. with .any()")
            return
        self.loops.append(False)
        with self.block() as body:
            self.visit_block(self.loop_body(node))
        self.loops.pop()
        self.emit(ir.While(B.as_expr(cond), tuple(body), self.loc(node)))

    def visit_Break(self, node):
        if not self.loops:
            raise TinyadSyntaxError("`break` outside a run-time loop", self.loc(node),
                                    hint="loops under ti.static are unrolled and cannot break")
        if self.loops[-1]:
            raise KernelSimplicityRuleError("`break` in the kernel's outermost (parallel) loop",
                                            self.loc(node), hint="put ti.loop_config(serialize="
                                            "True) before the loop: a serial loop may break")
        self.emit(ir.Break(self.loc(node)))

    def visit_Return(self, node):
        value = self.visit(node.value) if node.value is not None else None
        frame = self.frame
        if frame.is_kernel:
            if self.kernel_ret is None:
                raise TinyadSyntaxError("the kernel returns a value but declares no return type",
                                        self.loc(node), hint="annotate it, e.g. `-> ti.f32`")
            if self.dynamic_depth:      # (as Taichi: a kernel's value is known at its end)
                raise TinyadSyntaxError(
                    "Return inside non-static if/for is not supported: a kernel returns at its "
                    "end, or inside an `if` decided when it is traced (ti.static)",
                    self.loc(node), hint="store the result in a variable and return it at "
                                         "the end of the kernel")
            self.emit(ir.Return(self.coerce(value, self.kernel_ret, node), self.loc(node)))
        elif frame.ret_insert_at is None:
            frame.ret_binding = value   # the func's single return at its end
        else:
            self._assign_return(value, node)

    def _assign_return(self, value, node):
        frame = self.frame
        if frame.ret_binding is None:  # first return: declare the result where the call began
            block, index = frame.ret_insert_at
            holder = []
            self.blocks.append(holder)
            self.frame.scopes.append({})
            value = value if is_traced(value) else B.as_expr(value)
            if isinstance(value, Matrix):
                dtype = entry_dtype(value.entries) or B.python_dtype(value.entries[0])
                zero = value._like([B.const(0, dtype)] * len(value.entries))
            else:
                zero = B.const(0, value.dtype)
            self.declare("ret", zero, node)   # the result local, declared before the call
            frame.ret_binding = self.frame.scopes.pop()["ret"]
            self.blocks.pop()
            block[index:index] = holder
        lv = self._binding_lvalue(frame.ret_binding)
        self.assign(lv, value, node)

    def _binding_lvalue(self, binding):
        if isinstance(binding, ir.Var):
            return LValue([LocalRef(binding)], ())
        shape = (binding.n,) if binding.ndim == 1 else (binding.n, binding.m)
        return LValue([LocalRef(v) for v in binding.vars], shape)

    def visit_With(self, node):
        self.unsupported(node, "`with` blocks")

    def visit_FunctionDef(self, node):
        self.unsupported(node, "nested function definitions", "define a @ti.func at module level")

    def visit_Assert(self, node):
        trace_assert(self, node)

    from tinyad.frontend.loops import (  # noqa: E402, I001
        bind_static_target, fill_loop, loop_body, visit_For)

    # ---- ti.func inlining ----------------------------------------------------------------------
    def inline(self, func, args, kwargs, node):
        if len(self.frames) > MAX_INLINE_DEPTH:
            raise TinyadSyntaxError(f"ti.func {func.fn.__name__} calls itself too deeply (tinyad "
                                    "inlines funcs, so recursion is not supported)", self.loc(node),
                                    hint="rewrite the recursion as a loop")
        source = func.source
        given = len(args)
        args = func.bound_arguments(args)     # a method of a data_oriented class: self first
        by_reference = self._locals_passed(func, node, len(args) - given)
        try:
            bound = inspect.signature(func.fn).bind(*args, **kwargs)
        except TypeError as exc:
            raise TinyadTypeError(f"{func.fn.__name__}(): {exc}", self.loc(node),
                                  hint=f"its parameters: {func.fn.__name__}"
                                       f"{inspect.signature(func.fn)}") from None
        bound.apply_defaults()
        body = rewrite_early_returns(source.tree.body)
        guarded = guard_loop_returns(body)
        if guarded is not None:        # returns from inside loops: each sets the result
            body, returns = guarded, 2
        else:
            returns = check_tail_returns(body, source)
        reassigned = assigned_names(body)
        frame = FunctionFrame(source)
        if returns > 1 or (returns == 1 and not isinstance(body[-1], ast.Return)):
            frame.ret_insert_at = (self.blocks[-1], len(self.blocks[-1]))
        self.frames.append(frame)
        try:
            for name, value in bound.arguments.items():
                annotation = func.fn.__annotations__.get(name)
                kind = resolve_annotation(annotation) if annotation is not None else None
                if isinstance(kind, StructType):      # a struct: passed by value, as in Taichi
                    self.declare(name, value, node)
                elif kind == "template" or not (is_traced(value) or isinstance(value, numbers.Number)):
                    frame.scopes[-1][name] = by_reference.get(name, value) if kind == "template" \
                        else value
                elif name in reassigned or (is_traced(value) and not _all_leaves(value)):
                    self.declare(name, value, node, kind if isinstance(kind, T.DType) else None)
                elif isinstance(kind, T.DType):
                    frame.scopes[-1][name] = B.cast(value, kind)
                else:
                    frame.scopes[-1][name] = value
            self.visit_block(body)
        finally:
            self.frames.pop()
        binding = frame.ret_binding
        if isinstance(binding, LocalMatrix):
            binding = Matrix._make(binding.vars, binding.n, binding.m, binding.ndim)
        return _as_declared_return(binding, func.fn)

    def _locals_passed(self, func, call, skipped: int) -> dict:
        """{parameter: the caller's local} for each local variable passed by name: a
        ti.template() parameter takes it by reference, as in Taichi, so a func may accumulate
        into its caller's `ret` (SPH codes' for_all_neighbors(p_i, task, ret))."""
        if any(isinstance(a, ast.Starred) for a in call.args):
            return {}
        names = list(inspect.signature(func.fn).parameters)[skipped:]
        passed = list(zip(names, call.args)) + [(k.arg, k.value) for k in call.keywords]
        found = {}
        for name, arg in passed:
            scope = self.frame.find_scope(arg.id) if isinstance(arg, ast.Name) else None
            if scope is not None and isinstance(scope[arg.id], (ir.Var, LocalMatrix, Struct)):
                found[name] = scope[arg.id]
        return found


def _as_declared_return(value, fn):
    """A func's result in the type its `-> ti.i32` (or vector / matrix type) declares, as
    Taichi converts it: `-> ti.i32` returning 1.5 gives 1."""
    declared = fn.__annotations__.get("return")
    if declared is None:
        return value
    try:
        kind = resolve_annotation(eval_annotation(declared, fn))
    except (TinyadError, NameError):   # a type tinyad does not convert to: the value as it is
        return value
    if isinstance(kind, (lang.VectorType, lang.MatrixType)) and isinstance(value, Matrix):
        return value.map(lambda e: B.cast(e, T.resolve_dtype(kind.dtype))) if kind.dtype else value
    if isinstance(kind, T.DType) and (B.is_expr(value) or isinstance(value, numbers.Number)):
        return B.cast(value, kind)
    return value


def _shape_hint(fld) -> str:
    return (f"an element of {fld.name} is a {fld.element_shape} vector or matrix"
            if fld.element_shape else f"an element of {fld.name} is one number")


def _all_leaves(value):
    entries = value.entries if isinstance(value, Matrix) else [value]
    return all(is_leaf(e) or not B.is_expr(e) for e in entries)


def _reads_any(values, slots) -> bool:
    """Does any of `values` read one of the target `slots` (a local, or the field of an
    element; a slot picked at run time counts as read)?"""
    names, fields = set(), set()
    for slot in slots:
        if isinstance(slot, LocalRef):
            names.add(slot.var.name)
        elif isinstance(slot, FieldRef):
            fields.add(id(slot.field))
        else:
            return True
    for value in values:
        if B.is_expr(value):
            for sub in ir.walk_expr(value):
                if (isinstance(sub, ir.Var) and sub.name in names) or (
                        isinstance(sub, ir.Load) and id(sub.field) in fields):
                    return True
    return False


def _binop_name(node):
    from tinyad.frontend.exprs import BINOPS  # noqa: PLC0415
    name, py_op = BINOPS[type(node.op)]
    return name, py_op


def _is_static_call(node, tracer) -> bool:
    try:
        return tracer.named_callee(node) is lang.static
    except TinyadError:
        return False


def trace_kernel(fn, template_args: dict, name: str) -> ir.Kernel:
    """Trace `fn` (a @ti.kernel's function) into an IR kernel."""
    source = Source.of(fn)
    tracer = Tracer()
    frame = FunctionFrame(source, is_kernel=True)
    tracer.frames.append(frame)
    tracer.blocks.append([])
    args = []
    for pname, kind in parameter_kinds(fn, source).items():
        loc = source.loc(source.tree)
        if kind == "template" or isinstance(kind, lang.NdarrayType):   # ndarray: an ArrayParam
            frame.scopes[-1][pname] = template_args[pname]
        elif isinstance(kind, (lang.VectorType, lang.MatrixType)):
            dtype = T.resolve_dtype(kind.dtype) if kind.dtype else T.f32
            count = int(np.prod(kind.shape))
            names = [tracer.namer.fresh(f"{pname}_{k}") for k in range(count)]
            args.extend(ir.Arg(n, dtype) for n in names)
            frame.scopes[-1][pname] = LocalMatrix([ir.Var(n, dtype, loc) for n in names],
                                                  kind.shape[0], kind.shape[-1] if len(kind.shape) > 1 else 1,
                                                  len(kind.shape))
        else:
            arg = ir.Arg(tracer.namer.fresh(pname), kind)
            args.append(arg)
            frame.scopes[-1][pname] = ir.Var(arg.name, kind, loc)
    ret = inspect.signature(fn).return_annotation
    ret = None if ret in (inspect.Signature.empty, None) else eval_annotation(ret, fn)
    if isinstance(ret, (lang.VectorType, lang.MatrixType, tuple, StructType)):
        raise TinyadTypeError(f"kernel {name} returns {ret!r}: tinyad kernels return one "
                              "scalar", source.loc(source.tree), hint="store the result in a "
                              "field and read it after the launch (a ti.func may return vectors)")
    tracer.kernel_ret = None if ret is None else T.resolve_dtype(ret)
    body = rewrite_early_returns(source.tree.body)
    check_tail_returns(body, source)      # (visit_Return refuses one under a run-time if)
    with B.local_sink(tracer.new_local):
        tracer.visit_block(body)
    return ir.Kernel(name, tuple(args), tuple(tracer.blocks[0]), tracer.kernel_ret,
                     source.loc(source.tree))


__all__ = ["trace_kernel", "parameter_kinds", "resolve_annotation", "Tracer"]  # (re-exported)
