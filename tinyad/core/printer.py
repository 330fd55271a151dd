"""IR -> readable text, for lessons, error messages and `kernel.ir`.

    kernel compute_y():
      y[] = sin(x[])                                      # prog.py:7
"""
from __future__ import annotations

import os

from tinyad.core import ir
from tinyad.core.ops import POW, TABLE

COMMENT_COLUMN = 60


def with_source_comment(text: str, loc, column: int = COMMENT_COLUMN) -> str:
    """`text`, then `# file:line` of the user's source at `column`: every printed line of IR
    (and of generated code) says where it came from."""
    return f"{text.ljust(column)}  # {os.path.basename(loc.file)}:{loc.line}"


def format_expr(expr: ir.Expr, parent_precedence: int = 0) -> str:
    if isinstance(expr, ir.Const):
        if expr.dtype.is_float:  # shortest text that round-trips in the constant's precision
            text = str(expr.dtype.np(expr.value))
            return text if any(c in text for c in ".einf") else text + ".0"
        return str(expr.value)
    if isinstance(expr, ir.Var):
        return expr.name
    if isinstance(expr, ir.Load):
        return f"{expr.field.name}[{', '.join(format_expr(i) for i in expr.indices)}]"
    op, args, spec = expr.op, expr.args, TABLE[expr.op]
    if op == "cast":
        return f"{expr.dtype}({format_expr(args[0])})"
    if op == "random":
        return f"random({expr.dtype})"
    if spec.infix is None:
        return f"{op}({', '.join(format_expr(a) for a in args)})"
    mine = spec.precedence
    if len(args) == 1:
        text = spec.infix + format_expr(args[0], mine)
    else:   # operands of the same level: left-grouped, except `**`, which groups from the right
        left, right = (mine + 1, mine) if mine == POW else (mine, mine + 1)
        text = f"{format_expr(args[0], left)} {spec.infix} {format_expr(args[1], right)}"
    return f"({text})" if mine < parent_precedence else text


def _target(field, indices) -> str:
    return f"{field.name}[{', '.join(format_expr(i) for i in indices)}]"


class _Printer:
    def __init__(self):
        self.lines: list[str] = []
        self.declared: set[str] = set()
        self.last_loc = None

    def line(self, depth: int, text: str, loc=None):
        text = "  " * depth + text
        if loc is not None and loc.line and loc != self.last_loc:
            text = with_source_comment(text, loc)
            self.last_loc = loc
        self.lines.append(text)

    def block(self, stmts, depth):
        if not stmts:
            self.line(depth, "pass")
        for stmt in stmts:
            self.stmt(stmt, depth)

    def stmt(self, s, depth):
        if isinstance(s, ir.Assign):
            typed = s.name if s.name in self.declared else f"{s.name}: {s.value.dtype}"
            self.declared.add(s.name)
            self.line(depth, f"{typed} = {format_expr(s.value)}", s.loc)
        elif isinstance(s, ir.Store):
            self.line(depth, f"{_target(s.field, s.indices)} = {format_expr(s.value)}", s.loc)
        elif isinstance(s, ir.AtomicOp):
            target = _target(s.field, s.indices)
            text = (f"{target} += {format_expr(s.value)}" if s.op == "add" and not s.result else
                    f"atomic_{s.op}({target}, {format_expr(s.value)})")
            if s.result:
                text = f"{s.result} = {text}"
            self.line(depth, text, s.loc)
        elif isinstance(s, ir.If):
            self.line(depth, f"if {format_expr(s.cond)}:", s.loc)
            self.block(s.then, depth + 1)
            if s.orelse:
                self.line(depth, "else:")
                self.block(s.orelse, depth + 1)
        elif isinstance(s, ir.For):
            rng = f"range({format_expr(s.start)}, {format_expr(s.stop)})"
            if s.reverse:
                rng = f"reversed({rng})"
            kind = "  parallel" if s.parallel else ""
            self.line(depth, f"for {s.var} in {rng}:{kind}", s.loc)
            self.block(s.body, depth + 1)
        elif isinstance(s, ir.While):
            self.line(depth, f"while {format_expr(s.cond)}:", s.loc)
            self.block(s.body, depth + 1)
        elif isinstance(s, ir.Break):
            self.line(depth, "break", s.loc)
        elif isinstance(s, ir.Return):
            self.line(depth, f"return {format_expr(s.value)}", s.loc)
        elif isinstance(s, ir.Save):
            self.line(depth, f"save {s.name}", s.loc)
        elif isinstance(s, ir.Restore):
            self.line(depth, f"restore {s.name}", s.loc)
        elif isinstance(s, ir.Print):
            values = "".join(f", {format_expr(v)}" for v in s.values)
            self.line(depth, f"print({s.template!r}{values})", s.loc)
        elif isinstance(s, ir.Assert):
            values = "".join(f", {format_expr(v)}" for v in s.values)
            self.line(depth, f"assert {format_expr(s.cond)}, ({s.template!r}{values})", s.loc)
        else:  # pragma: no cover  (the IR is a closed set)
            raise TypeError(f"unknown statement {s!r}")


def format_kernel(kernel: ir.Kernel) -> str:
    printer = _Printer()
    printer.declared.update(a.name for a in kernel.args)
    args = ", ".join([f"{a.name}: {a.dtype}" for a in kernel.args] + _array_params(kernel))
    ret = f" -> {kernel.ret}" if kernel.ret else ""
    printer.line(0, f"kernel {kernel.name}({args}){ret}:")
    printer.block(kernel.body, 1)
    return "\n".join(printer.lines)


def _array_params(kernel: ir.Kernel) -> list[str]:
    """The kernel's ndarray parameters (tinyad/arrayparams.py), as its header shows them."""
    shown = {}
    for f in ir.fields_of(kernel.body):
        if getattr(f, "is_array_param", False):
            param = f.primal if f.role == "grad" else f
            shown.setdefault(param.name, param)
    return [f"{p.name}: ndarray({p.dtype}, {p.shape}"
            + (f", element {p.element_shape})" if p.element_shape else ")")
            for p in sorted(shown.values(), key=lambda p: p.position)]


def format_stmt(stmt: ir.Stmt) -> str:
    printer = _Printer()
    printer.stmt(stmt, 0)
    return "\n".join(line.split("  #")[0].rstrip() for line in printer.lines)


ir.Kernel.__str__ = format_kernel    # str(kernel) prints it (ir.py builds on nothing above it)
