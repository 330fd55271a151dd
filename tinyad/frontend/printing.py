"""`print(...)` in a kernel -> one ir.Print statement (and an assert's message, ir.Assert).

Taichi's print: arguments joined by `sep` (" "), then `end` ("\\n"); vectors and matrices as
`[a, b]` and `[[a, b], [c, d]]`; f-strings with optional format specs. A value without a spec
gets Taichi's default format for its type: f32 `%f`, f64 `%.12f`, integers `%d`. The template
is built at trace time; the backends format the values with ir.print_text.
"""
from __future__ import annotations

import ast
import numbers
import re

import numpy as np

from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import TinyadSyntaxError, TinyadTypeError
from tinyad.frontend.matrix import Matrix


def default_spec(dtype: T.DType) -> str:
    if dtype.is_float:
        return ".12f" if dtype.bits == 64 else "f"
    return "d"


class _Template:
    """A template under construction: literal text and `{:spec}` slots with their values."""

    def __init__(self):
        self.text: list[str] = []
        self.values: list = []

    def literal(self, text: str):
        self.text.append(text.replace("{", "{{").replace("}", "}}"))

    def value(self, value, spec: str | None, loc):
        if isinstance(value, (Matrix, list, tuple)):
            rows = list(value)     # a matrix iterates over its rows
            self.literal("[")
            for k, item in enumerate(rows):
                if k:
                    self.literal(", ")
                self.value(item, spec, loc)
            self.literal("]")
        elif isinstance(value, str):
            self.literal(value if not spec else format(value, spec))
        elif B.is_expr(value):
            self.values.append(value)
            self.text.append("{:" + (spec or default_spec(value.dtype)) + "}")
        elif isinstance(value, (numbers.Number, np.generic)):   # known at trace time
            dtype = B.python_dtype(value)
            self.literal(format(dtype.np(value), spec or default_spec(dtype)))
        else:
            raise TinyadTypeError(f"print() cannot show a {type(value).__name__} in a kernel",
                                  loc, hint="print numbers, vectors, matrices and strings")


def trace_print(tracer, node: ast.Call):
    """Emit the Print statement for `print(...)` at `node`."""
    loc = tracer.loc(node)
    options = {"sep": " ", "end": "\n"}
    for kw in node.keywords:
        if kw.arg not in options:
            raise TinyadSyntaxError(f"print() in a kernel takes sep= and end=, not {kw.arg}=", loc)
        options[kw.arg] = tracer.visit(kw.value)
        if not isinstance(options[kw.arg], str):
            raise TinyadTypeError(f"print()'s {kw.arg}= must be a string", loc)
    template = _Template()
    for k, arg in enumerate(node.args):
        if k:
            template.literal(options["sep"])
        if isinstance(arg, ast.Starred):
            raise TinyadSyntaxError("print(*values) in a kernel", loc, hint="name each value")
        if isinstance(arg, ast.JoinedStr):
            _fstring(tracer, arg, template)
        else:
            template.value(tracer.visit(arg), None, loc)
    template.literal(options["end"])
    tracer.emit(ir.Print("".join(template.text), tuple(template.values), loc))


def _fstring(tracer, node: ast.JoinedStr, template: _Template):
    for part in node.values:
        if isinstance(part, ast.Constant):
            template.literal(str(part.value))
            continue
        spec = None
        if part.format_spec is not None:
            spec = "".join(str(tracer.visit(p)) if not isinstance(p, ast.Constant) else
                           str(p.value) for p in part.format_spec.values)
        value = tracer.visit(part.value)
        if part.conversion not in (-1, None) and not B.is_expr(value):
            value = {ord("r"): repr, ord("s"): str, ord("a"): ascii}[part.conversion](value)
        template.value(value, spec, tracer.loc(part))


# printf conversions in an assert's message (`"x[%d] = %f" % (i, x[i])`, Taichi's form)
_PRINTF = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)([diouxXeEfFgGcs%])")


def trace_assert(tracer, node: ast.Assert):
    """Emit the Assert statement for `assert test, message` at `node` (a test known true at
    trace time emits nothing)."""
    loc = tracer.loc(node)
    cond = tracer.visit(node.test)
    if isinstance(cond, Matrix):
        raise TinyadTypeError("assert needs one truth value, got a vector or matrix", loc,
                              hint="assert all(v == w), or any(...)")
    if not B.is_expr(cond):
        if cond:
            return
        cond = B.const(0, T.i32)
    template = _Template()
    message = node.msg
    if message is None:
        template.literal(f"assert {ast.unparse(node.test)}")
    elif isinstance(message, ast.JoinedStr):
        _fstring(tracer, message, template)
    elif isinstance(message, ast.BinOp) and isinstance(message.op, ast.Mod) and \
            isinstance(message.left, ast.Constant) and isinstance(message.left.value, str):
        args = message.right.elts if isinstance(message.right, ast.Tuple) else [message.right]
        _printf(tracer, message.left.value, [tracer.visit(a) for a in args], template, loc)
    else:
        template.value(tracer.visit(message), None, loc)
    tracer.emit(ir.Assert(cond, "".join(template.text), tuple(template.values), loc))


def _printf(tracer, text: str, args: list, template: _Template, loc):
    """`text % args` as template slots: %d, %f, %.3f, %s ... one argument each."""
    args = iter(args)
    end = 0
    for conversion in _PRINTF.finditer(text):
        template.literal(text[end:conversion.start()])
        end = conversion.end()
        flags, kind = conversion.groups()
        if kind == "%":
            template.literal("%")
            continue
        spec = None if kind == "s" else flags + ("d" if kind in "iu" else kind)
        try:
            template.value(next(args), spec, loc)
        except StopIteration:
            raise TinyadTypeError(f"the assert message {text!r} has more % conversions than "
                                  "values", loc) from None
    template.literal(text[end:])
