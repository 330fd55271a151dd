"""Frontend, expressions: Python expression syntax -> traced values.

A traced value is an IR expression (a scalar known at run time), a Matrix of them, or any Python
object known at trace time (numbers, fields, functions, tuples). Python values are computed right
away, which is what makes `ti.static`, closures and constants free.
"""
from __future__ import annotations

import ast
import builtins
import operator

from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import TinyadError, TinyadRuntimeError, TinyadSyntaxError, TinyadTypeError
from tinyad.core.ops import PYTHON_OPERATORS, TABLE
from tinyad.frontend import lang
from tinyad.frontend.matrix import Matrix
from tinyad.frontend.printing import trace_print
from tinyad.frontend.pycalls import (
    call_failure,
    refuse_stateful_call,
    refuse_text_of_kernel_value,
)
from tinyad.frontend.scope import LocalMatrix
from tinyad.frontend.structs import StructRef, is_struct_field

# Python's operators -> (op name, the operator on values known at trace time), from the op table.
BINOPS = {node: pair for node, pair in PYTHON_OPERATORS.items() if issubclass(node, ast.operator)}
BINOPS[ast.MatMult] = ("matmul", operator.matmul)   # matrices only: not a scalar op
COMPARES = {node: pair for node, pair in PYTHON_OPERATORS.items() if issubclass(node, ast.cmpop)}
SUGGESTIONS = {
    ast.Lambda: "define a @ti.func instead",
    ast.JoinedStr: "kernels cannot build strings",
    ast.Dict: "kernels have no dicts; use ti.static on a dict built outside the kernel",
    ast.Set: "kernels have no sets",
    ast.Await: "kernels cannot await",
    ast.Yield: "kernels cannot yield",
    ast.NamedExpr: "assign on a separate line",
    ast.GeneratorExp: "write the loop out: `total = 0.0`, then `for i in range(n): total += ...`",
    ast.ListComp: "write the loop out, or build the list outside the kernel",
    ast.Try: "kernels have no exceptions: test the values with `if` instead",
    ast.With: "kernels have no context managers: do this in Python scope, around the launch",
    ast.ClassDef: "define classes at module level (ti.data_oriented for kernels with state)",
    ast.Global: "kernels return results through fields: store the value in a field",
    ast.Nonlocal: "kernels return results through fields: store the value in a field",
    ast.Delete: "leave the variable alone: it ends with the kernel",
    ast.Raise: "kernels cannot raise: check the values in Python scope after the launch",
    ast.Import: "import at the top of the file",
    ast.ImportFrom: "import at the top of the file",
    ast.While: "put the `else` code after the loop, guarded by a flag the loop sets",
    ast.Slice: "slice with constants (v[:2]), or index each element",
    ast.Subscript: "put the values in a field, or loop with `for i in ti.static(range(n))`",
}
GENERIC_HINT = ("kernels take assignments, if, for, while, break, continue, return and calls to "
                "@ti.func and ti.* functions")


def is_traced(value) -> bool:
    return B.is_expr(value) or isinstance(value, Matrix)


class ExprVisitor:
    """Mixin of the Tracer: one visit_X per supported expression node."""

    def unsupported(self, node, what=None, hint=None):
        what = what or f"`{type(node).__name__}` expressions"
        raise TinyadSyntaxError(f"{what} are not supported in tinyad kernels", self.loc(node),
                                hint or SUGGESTIONS.get(type(node), GENERIC_HINT))

    # ---- leaves ---------------------------------------------------------------------------
    def visit_Constant(self, node):
        return node.value

    def visit_Name(self, node):
        binding = self.frame.lookup(node.id, self.loc(node))
        if isinstance(binding, LocalMatrix):
            return Matrix._make(binding.vars, binding.n, binding.m, binding.ndim)
        return binding

    def visit_Tuple(self, node):
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node):
        return [self.visit(e) for e in node.elts]

    def visit_ListComp(self, node):
        """Evaluated at trace time over static iterables: [x[i] for i in range(3)]."""
        out = []
        self._comprehend(node.generators, lambda: out.append(self.visit(node.elt)))
        return out

    def _comprehend(self, generators, emit):
        if not generators:
            emit()
            return
        gen = generators[0]
        iterable = self.visit(gen.iter)
        if is_traced(iterable) and not isinstance(iterable, Matrix):
            self.unsupported(gen, "comprehensions over run-time values")
        for item in iterable:
            self.frame.scopes.append({})
            self.bind_static_target(gen.target, item)
            if all(self._static_truth(self.visit(cond), cond) for cond in gen.ifs):
                self._comprehend(generators[1:], emit)
            self.frame.scopes.pop()

    def _static_truth(self, value, node):
        if is_traced(value):
            raise TinyadSyntaxError("this condition must be known at trace time",
                                    self.loc(node), hint="wrap it in ti.static(...)")
        return bool(value)

    # ---- operators ------------------------------------------------------------------------
    def visit_BinOp(self, node):
        a, b = self.visit(node.left), self.visit(node.right)
        name, py_op = BINOPS.get(type(node.op), (None, None))
        if name is None:
            self.unsupported(node, f"the operator {type(node.op).__name__}")
        if not is_traced(a) and not is_traced(b):
            return self.python(py_op, a, b, node=node)
        if name == "matmul":
            return a @ b
        if isinstance(a, Matrix) or isinstance(b, Matrix):
            return py_op(a, b)
        return B.binary(name, a, b)

    def visit_UnaryOp(self, node):
        value = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return B.unary("not", value) if B.is_expr(value) else self.python(operator.not_, value, node=node)
        if isinstance(node.op, ast.Invert) and B.is_expr(value):
            return B.unary("bit_not", value)
        py_op = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
        return self.python(py_op[type(node.op)], value, node=node)

    def visit_BoolOp(self, node):
        name = "and" if isinstance(node.op, ast.And) else "or"
        result = self.visit(node.values[0])
        for value_node in node.values[1:]:
            if not is_traced(result):  # Python short-circuit on values known now
                if (name == "and") != bool(result):
                    return result
                result = self.visit(value_node)
                continue
            result = _logic(name, result, self.visit(value_node))
        return result

    def visit_Compare(self, node):
        left = self.visit(node.left)
        results = []
        for op, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            traced = is_traced(left) or is_traced(right)
            if type(op) in COMPARES:
                name, py_op = COMPARES[type(op)]
                if not traced:
                    results.append(self.python(py_op, left, right, node=node))
                elif isinstance(left, Matrix) or isinstance(right, Matrix):
                    results.append(py_op(left, right))
                else:
                    results.append(B.binary(name, left, right))
            elif traced:
                self.unsupported(node, f"`{type(op).__name__}` on kernel values")
            else:
                py_op = {ast.Is: operator.is_, ast.IsNot: operator.is_not,
                         ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}[type(op)]
                results.append(self.python(py_op, left, right, node=node))
            left = right
        out = results[0]
        for value in results[1:]:  # a < b < c is (a < b) and (b < c)
            out = B.binary("and", out, value) if is_traced(out) or is_traced(value) else (out and value)
        return out

    def visit_IfExp(self, node):
        cond = self.visit(node.test)
        if not is_traced(cond):
            return self.visit(node.body) if cond else self.visit(node.orelse)
        if isinstance(cond, Matrix):
            return lang.select(cond, self.visit(node.body), self.visit(node.orelse))
        return self.branching_if_expression(cond, node)

    def branching_if_expression(self, cond, node):
        """`a if c else b` on a run-time scalar c evaluates only the arm taken, as Taichi's
        ifte does: `p[t, i] if 0 <= i < n else 0` never loads (nor, in the adjoint, accumulates
        into) the element out of bounds, and `x / y if y != 0 else 0` has no NaN gradient at
        y = 0. Vector arms are selected element-wise, as Taichi does."""
        with self.block() as then:
            a = self.visit(node.body)
        with self.block() as orelse:
            b = self.visit(node.orelse)
        if isinstance(a, Matrix) or isinstance(b, Matrix):
            self.blocks[-1].extend(then + orelse)
            return lang.select(cond, a, b)
        dtypes = [v.dtype if B.is_expr(v) else B.python_dtype(v) for v in (a, b)]
        common = T.promote(*dtypes)
        loc = self.loc(node)
        result = ir.Var(self.namer.fresh("ifexp"), common, loc)
        self.emit(ir.Assign(result.name, B.cast(0, common), loc))
        then.append(ir.Assign(result.name, B.cast(a, common), loc))
        orelse.append(ir.Assign(result.name, B.cast(b, common), loc))
        self.emit(ir.If(B.as_expr(cond), tuple(then), tuple(orelse), loc))
        return result

    # ---- attributes and subscripts -----------------------------------------------------------
    def visit_Attribute(self, node):
        obj = self.visit(node.value)
        if ir.is_field(obj) and node.attr in ("grad", "dual"):
            twin = getattr(obj, node.attr)
            if twin is None or getattr(twin, "is_absent_twin", False):   # (tinyad/absent.py)
                flag = "needs_grad" if node.attr == "grad" else "needs_dual"
                raise TinyadRuntimeError(
                    f"Gradient {obj.name}.{node.attr} has not been placed, check whether "
                    f"`{flag}=True`", self.loc(node),
                    hint=f"declare {obj.name} with {flag}=True, or call ti.root.lazy_grad()")
            return twin
        try:
            return getattr(obj, node.attr)
        except TinyadError as exc:        # ti.<typo>: the package's own message and hint
            raise TinyadSyntaxError(exc.message, self.loc(node), hint=exc.hint) from None
        except AttributeError:
            raise TinyadSyntaxError(f"{type(obj).__name__} has no attribute '{node.attr}'",
                                    self.loc(node)) from None

    def visit_Slice(self, node):
        """A constant slice (v[:2], m[1, :]); its bounds must be known at trace time."""
        bounds = [self.visit(b) if b is not None else None for b in (node.lower, node.upper, node.step)]
        if any(B.is_expr(b) for b in bounds):
            self.unsupported(node, "slices with run-time bounds")
        return slice(*bounds)

    def subscript_key(self, node):
        """The evaluated index of a field subscript, as a tuple."""
        key = self.visit(node.slice)
        if isinstance(key, slice) or (isinstance(key, tuple) and any(isinstance(k, slice) for k in key)):
            self.unsupported(node, "slices of fields", "index each element")
        if key is None:
            return ()
        if isinstance(key, Matrix):
            return tuple(key.entries)
        if not isinstance(key, tuple):
            return (key,)
        flat = []
        for k in key:
            flat.extend(k.entries if isinstance(k, Matrix) else [k])
        return tuple(flat)

    def field_indices(self, fld, key: tuple, node) -> tuple:
        if hasattr(fld, "require_current"):      # a field from before the last ti.init()
            fld.require_current(self.loc(node))
        if not fld.is_placed:
            raise TinyadRuntimeError(f"field {fld.name} is used in a kernel before it has a shape",
                                     self.loc(node), hint=f"give it shape=, or place it with "
                                     f"ti.root.dense(ti.i, n).place({fld.name})")
        if len(key) == fld.ndim - 1 and _under_dynamic(fld):
            raise TinyadTypeError(
                f"field {fld.name} is placed under ti.root...dynamic(...): tinyad stores it "
                "densely and has no dynamic-list operations (x[i].append(v), x[i].length(), "
                "x[i].deactivate(), ti.append, ti.length)", self.loc(node),
                hint="keep the count in an integer field: k = ti.atomic_add(count[i], 1), "
                     f"then {fld.name}[i, k] = v; loop over range(count[i])")
        if len(key) != fld.ndim:
            raise TinyadTypeError(f"field {fld.name} has {fld.ndim} dimension(s) {fld.shape}, "
                                  f"indexed with {len(key)} index(es)", self.loc(node),
                                  hint=f"write {fld.name}[None] for a 0-D field" if fld.ndim == 0
                                  else f"give one index per dimension: {fld.name}"
                                       f"[{', '.join('ijkl'[:fld.ndim])}]")
        indices = []
        for k in key:
            if isinstance(k, float) or (B.is_expr(k) and k.dtype.is_float):
                raise TinyadTypeError(f"field {fld.name} is indexed with a float", self.loc(node),
                                      hint="convert the index with ti.cast(i, ti.i32) or int(i)")
            if not (B.is_expr(k) or isinstance(k, int) or hasattr(k, "__index__")):
                raise TinyadTypeError(f"field {fld.name} is indexed with {type(k).__name__} {k!r}",
                                      self.loc(node))
            indices.append(B.as_expr(k if B.is_expr(k) else int(k)))
        offset = getattr(fld, "offset", None)
        if offset:   # offset=: storage starts at the first valid index
            indices = [B.binary("sub", k, o) if o else k for k, o in zip(indices, offset)]
        return tuple(indices)

    def load_field(self, fld, indices: tuple, node):
        loc = self.loc(node)
        stop = fld in self.stopped_fields()
        if not fld.element_shape:
            load = ir.Load(fld, indices, fld.dtype, loc)
            return B.unary("stop_grad", load) if stop else load
        loads = []
        for comp in _component_indices(fld.element_shape):
            load = ir.Load(fld, indices + tuple(B.const(c, T.i32) for c in comp), fld.dtype, loc)
            loads.append(B.unary("stop_grad", load) if stop else load)
        n, m = fld.n, fld.m
        return Matrix._make(loads, n, m, len(fld.element_shape))

    def visit_Subscript(self, node):
        obj = self.visit(node.value)
        if ir.is_field(obj):
            return self.load_field(obj, self.field_indices(obj, self.subscript_key(node), node), node)
        if is_struct_field(obj):             # s[i]: its members are read where they are used
            return StructRef(self, obj, self.subscript_key(node), node)
        key = self.visit(node.slice)
        if isinstance(obj, Matrix):
            return obj[key]
        if is_traced(key) and type(obj).__module__ == "numpy" and hasattr(obj, "shape"):
            raise TinyadTypeError("a numpy array passed as ti.template() is a constant of the "
                                  "trace: it cannot be indexed with a value known only when "
                                  "the kernel runs", self.loc(node),
                                  hint="annotate the parameter `ti.types.ndarray()` to pass an "
                                       "array, or copy it into a field (x.from_numpy(a))")
        if is_traced(key):
            self.unsupported(node, "indexing a Python list with a run-time value")
        return self.python(operator.getitem, obj, key, node=node)

    # ---- calls ------------------------------------------------------------------------------
    def visit_Call(self, node):
        fn = self.visit(node.func)
        if fn is lang.static:
            return self.visit_static(node)
        if fn in lang.ATOMICS:
            return self.atomic_call(lang.ATOMICS[fn], node)
        if fn is lang.loop_config:
            self.pending_serialize = bool(self.evaluate_kwargs(node).get("serialize", False))
            return None
        if fn is lang.stop_grad:
            return self.stop_grad_call(node)
        if fn is print:
            return trace_print(self, node)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.visit(a.value))
            else:
                args.append(self.visit(a))
        kwargs = self.evaluate_kwargs(node)
        if getattr(fn, "is_tinyad_func", False):          # a @ti.func (tinyad/kernel.py)
            return self.inline(fn, args, kwargs, node)
        if getattr(fn, "traces_its_call", False):   # ti.ad.grad(f) ... (tinyad/funcad.py)
            return fn.trace_call(self, args, kwargs, node)
        if getattr(fn, "is_tinyad_kernel", False):
            raise TinyadSyntaxError("a kernel cannot call another kernel", self.loc(node),
                                    hint="make the callee a @ti.func")
        owner = getattr(fn, "__self__", None)
        if ir.is_field(owner) and fn.__name__ == "fill" and len(args) == 1 and not kwargs:
            return self.fill_loop(owner, args[0], node)       # x.fill(v) in a kernel
        if fn in BUILTIN_OVERRIDES and any(is_traced(a) for a in args):
            return BUILTIN_OVERRIDES[fn](*args, **kwargs)
        # Anything else runs now, at trace time, as Taichi does: a plain Python function or a
        # lambda called with kernel values builds IR through their operators (an `if` on one
        # of them cannot, and says so: such a helper must be a @ti.func).
        return self.python(fn, *args, node=node, **kwargs)

    def evaluate_kwargs(self, node):
        return {kw.arg: self.visit(kw.value) for kw in node.keywords if kw.arg is not None}

    def visit_static(self, node):
        values = [self.visit(a) for a in node.args]
        for a, v in zip(node.args, values):
            if B.is_expr(v) or (isinstance(v, Matrix) and any(B.is_expr(e) for e in v.entries)):
                raise TinyadSyntaxError("ti.static() needs a value known at trace time, but this "
                                        "is only known when the kernel runs", self.loc(a),
                                        hint="use a Python constant, a field, or a template argument")
        return values[0] if len(values) == 1 else tuple(values)

    def python(self, fn, *args, node=None, **kwargs):
        """Call Python code at trace time; its failures become errors at the user's line."""
        refuse_stateful_call(fn, self.loc(node))
        refuse_text_of_kernel_value(fn, args, self.loc(node), is_traced)
        try:
            return fn(*args, **kwargs)
        except TinyadError:
            raise
        except Exception as exc:  # noqa: BLE001  (the user's mistake, or a bug in tinyad)
            traced = any(is_traced(a) for a in (*args, *kwargs.values()))
            raise call_failure(fn, args, exc, self.loc(node), traced_args=traced) from exc


def _under_dynamic(fld) -> bool:
    """Is the field placed under a ti.root...dynamic(...) level (a list per cell in Taichi)?"""
    node = getattr(fld, "snode", None)
    while node is not None:
        if getattr(node, "kind", None) == "dynamic":
            return True
        node = node.parent()
    return False


def _logic(name, a, b):
    """`a and b` / `a or b` on kernel scalars, as in Python and Taichi: the value of the operand
    that decides (`2 and 3` is 3, `0 or 5` is 5), both evaluated. On truth values (comparisons,
    logic) that is the plain logic op, which prints as such; a matrix operand makes it
    element-wise 1 / 0, as Taichi's vectors do."""
    if isinstance(a, Matrix):   # entry by entry (B.binary would fold the Matrix objects)
        return a._zip(b, lambda x, y: B.binary(name, x, y))
    if isinstance(b, Matrix):
        return b._zip(a, lambda x, y: B.binary(name, x, y), reflected=True)
    if _is_truth(a) and _is_truth(b):
        return B.binary(name, a, b)
    a = B.as_expr(a)
    decides = B.binary("ne", a, 0)
    return B.select(decides, b, a) if name == "and" else B.select(decides, a, b)


def _is_truth(value) -> bool:
    """Is this scalar 0 or 1 whatever it is at run time (a comparison's or a logic op's)?"""
    if isinstance(value, ir.Op):
        return TABLE[value.op].kind in ("compare", "logic")
    if isinstance(value, ir.Const):
        value = value.value
    return isinstance(value, (bool, int)) and value in (0, 1)


def _component_indices(element_shape):
    if len(element_shape) == 1:
        return [(i,) for i in range(element_shape[0])]
    return [(i, j) for i in range(element_shape[0]) for j in range(element_shape[1])]


def _to_float(x):
    return lang.cast(x, T.typing_defaults().fp)


def _to_int(x):
    return lang.cast(x, T.typing_defaults().ip)


def _builtin_max(*args):
    from tinyad.frontend import math  # noqa: PLC0415
    return math.max(*args)


def _builtin_min(*args):
    from tinyad.frontend import math  # noqa: PLC0415
    return math.min(*args)


def _matrix_truth(value, name):
    if not isinstance(value, Matrix):
        raise TinyadTypeError(f"{name}() in a kernel takes a vector or matrix, got a scalar",
                              B.current_loc(), hint="compare the scalar with 0 instead")
    return value.any() if name == "any" else value.all()


BUILTIN_OVERRIDES = {builtins.float: _to_float, builtins.int: _to_int,
                     builtins.abs: lambda x: abs(x), builtins.max: _builtin_max,
                     builtins.min: _builtin_min,
                     # iterating a matrix would ask each row for a truth value it does not have
                     builtins.any: lambda m: _matrix_truth(m, "any"),
                     builtins.all: lambda m: _matrix_truth(m, "all")}
