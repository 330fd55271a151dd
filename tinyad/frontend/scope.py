"""What the frontend keeps while tracing: scopes of local bindings, fresh names, source lines."""
from __future__ import annotations

import ast
import builtins
import copy
import difflib
import inspect
import textwrap
from dataclasses import dataclass, field

from tinyad.core import ir
from tinyad.core.errors import TinyadSyntaxError, TinyadTypeError
from tinyad.core.srcloc import SrcLoc


@dataclass
class LocalMatrix:
    """A vector or matrix local: one IR local per entry."""
    vars: list          # ir.Var per entry, row-major
    n: int
    m: int
    ndim: int


@dataclass
class Source:
    """A kernel's or func's parsed source, with the offsets that map AST positions to the file."""
    fn: object
    tree: ast.FunctionDef
    file: str
    line_offset: int
    col_offset: int

    @classmethod
    def of(cls, fn) -> "Source":
        try:
            lines, first_line = inspect.getsourcelines(fn)
        except (OSError, TypeError) as exc:
            raise TinyadTypeError(
                f"tinyad needs the source code of {fn.__qualname__} to trace it ({exc})",
                hint="define kernels and funcs in a .py file, not in `python -c` or a bare "
                     "interactive prompt") from None
        text = "".join(lines)
        dedented = textwrap.dedent(text)
        indent = len(lines[0]) - len(lines[0].lstrip()) if dedented != text else 0
        tree = ast.parse(dedented)
        node = tree.body[0]
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise TinyadTypeError(f"{fn.__qualname__} is not a plain function")
        return cls(fn, node, inspect.getsourcefile(fn) or "<unknown>", first_line - 1, indent)

    def loc(self, node: ast.AST) -> SrcLoc:
        line = getattr(node, "lineno", self.tree.lineno)
        col = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", line)
        end_col = getattr(node, "end_col_offset", None) if end_line == line else None
        return SrcLoc(self.file, line + self.line_offset, col + self.col_offset,
                      end_col + self.col_offset if end_col is not None else None,
                      self.fn.__name__)


@dataclass
class FunctionFrame:
    """The state of one kernel or inlined func being traced."""
    source: Source
    scopes: list = field(default_factory=lambda: [{}])
    is_kernel: bool = False
    ret_binding: object = None       # where a func's returns go (set at its first return)
    ret_insert_at: tuple = None      # (block list, index) where the result local is declared

    def lookup(self, name: str, loc: SrcLoc):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        fn = self.source.fn
        if fn.__code__.co_freevars and fn.__closure__:
            cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
            if name in cells:
                try:
                    return cells[name].cell_contents
                except ValueError:
                    pass
        if name in fn.__globals__:
            return fn.__globals__[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        known = [n for scope in self.scopes for n in scope if isinstance(n, str)]
        close = difflib.get_close_matches(name, known + list(fn.__globals__), n=1)
        raise TinyadSyntaxError(f"name '{name}' is not defined", loc,
                                hint=f"did you mean '{close[0]}'?" if close else
                                "define it before the kernel, or assign it in the kernel first")

    def find_scope(self, name: str):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope
        return None


def assigned_names(body: list[ast.stmt]) -> set[str]:
    """Names a function body assigns to, or to an entry or member of (`p[i] = ...`, `p.x += 1`):
    its parameters that need their own local copy, as Taichi passes them by value."""
    names = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if not isinstance(getattr(node, "ctx", None), ast.Store):
            continue
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        if isinstance(node, ast.Name):
            names.add(node.id)
    return names


# Statements (AST nodes) an early-return rewrite may copy in all: past it, a function whose
# returns would need more copies keeps them where they are, and is refused at its returns.
REWRITE_BUDGET = 5000


def rewrite_early_returns(body: list[ast.stmt], budget: list | None = None) -> list[ast.stmt]:
    """An `if` that returns on some of its paths takes the statements after it into each path
    that goes on: `if c: (if d: return 1); x += 1` then `return 0` becomes `if c: (if d:
    return 1 else: x += 1; return 0) else: return 0`. So every return ends a path, where
    inlining (and a kernel's static ifs) can handle it. Each path gets its own copy of what
    follows; `budget` (nodes that may still be copied) stops a long chain from growing."""
    budget = [REWRITE_BUDGET] if budget is None else budget
    out = []
    for k, stmt in enumerate(body):
        if isinstance(stmt, ast.If):
            rest = body[k + 1:]
            if rest and _may_return(stmt) and budget[0] >= 0:
                branches = []
                for branch in (stmt.body, stmt.orelse):
                    if not _always_returns(branch):
                        budget[0] -= sum(1 for s in rest for _ in ast.walk(s))
                        branch = branch + copy.deepcopy(rest)
                    branches.append(rewrite_early_returns(branch, budget))
                out.append(ast.copy_location(ast.If(test=stmt.test, body=branches[0],
                                                    orelse=branches[1]), stmt))
                return out
            stmt = ast.copy_location(ast.If(test=stmt.test,
                                            body=rewrite_early_returns(stmt.body, budget),
                                            orelse=rewrite_early_returns(stmt.orelse, budget)),
                                     stmt)
        out.append(stmt)
    return out


def _may_return(stmt: ast.stmt) -> bool:
    return any(isinstance(node, ast.Return) for node in ast.walk(stmt))


def _always_returns(block: list[ast.stmt]) -> bool:
    """Does every path through `block` end in a `return`?"""
    if not block:
        return False
    last = block[-1]
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    return isinstance(last, ast.Return)


RETURNED = "_tinyad_returned"      # the flag of a func that may return from inside a loop


def guard_loop_returns(body: list[ast.stmt]) -> list[ast.stmt] | None:
    """A func that may return from inside a loop (`for i in range(n): if x[i] > 0: return i`),
    as a flag the IR can carry: each `return` also sets it, a `for` loop's iterations after it
    do nothing, a `while` loop stops, and what follows a statement that may have returned
    runs under `if not flag:`. No `break` for a `for` loop, so the func stays
    differentiable. -> None when no return is inside a loop."""
    if not any(isinstance(node, (ast.For, ast.While)) and _may_return(node)
               for stmt in body for node in ast.walk(stmt)):
        return None
    start = ast.copy_location(_set_flag(RETURNED, 0), body[0])
    return [start, *_guard_after_return(body)]


def _guard_after_return(stmts) -> list[ast.stmt]:
    out = []
    for k, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Return):
            out += [stmt, ast.copy_location(_set_flag(RETURNED, 1), stmt)]
            return out                     # the rest of this block never runs
        if not _may_return(stmt):
            out.append(stmt)
            continue
        if isinstance(stmt, ast.If):
            stmt = ast.If(test=stmt.test, body=_guard_after_return(stmt.body),
                          orelse=_guard_after_return(stmt.orelse))
        elif isinstance(stmt, ast.For):
            guarded = _unless(RETURNED, _guard_after_return(stmt.body), stmt)
            stmt = ast.For(target=stmt.target, iter=stmt.iter, body=[guarded],
                           orelse=stmt.orelse, type_comment=None)
        elif isinstance(stmt, ast.While):
            stop = ast.copy_location(ast.If(test=ast.Name(RETURNED, ast.Load()),
                                            body=[ast.copy_location(ast.Break(), stmt)],
                                            orelse=[]), stmt)
            stmt = ast.While(test=stmt.test, body=[*_guard_after_return(stmt.body), stop],
                             orelse=stmt.orelse)
        out.append(ast.copy_location(stmt, stmts[k]))
        rest = stmts[k + 1:]
        if rest:
            out.append(_unless(RETURNED, _guard_after_return(rest), rest[0]))
        return out
    return out


def rewrite_continues(body: list[ast.stmt], flag: str) -> list[ast.stmt]:
    """`continue` in a loop body becomes a flag the IR can carry: the body starts with
    `flag = 0`, each `continue` becomes `flag = 1`, and whatever follows a statement that may
    have continued runs under `if not flag:`. Loops nested inside keep their own continues."""
    if not _may_continue(body):
        return body
    start = ast.copy_location(_set_flag(flag, 0), body[0])
    return [start, *_guard_after_continue(body, flag)]


def _may_continue(stmts) -> bool:
    for stmt in stmts:
        if isinstance(stmt, ast.Continue):
            return True
        if isinstance(stmt, ast.If) and (_may_continue(stmt.body) or _may_continue(stmt.orelse)):
            return True
    return False


def _set_flag(flag: str, value: int) -> ast.Assign:
    return ast.Assign(targets=[ast.Name(flag, ast.Store())], value=ast.Constant(value))


def _unless(flag: str, body: list[ast.stmt], at: ast.AST) -> ast.If:
    """`if not flag: body`, at `at`'s place in the source."""
    test = ast.copy_location(ast.UnaryOp(ast.Not(), ast.Name(flag, ast.Load())), at)
    return ast.copy_location(ast.If(test=test, body=body, orelse=[]), at)


def _guard_after_continue(stmts, flag: str) -> list[ast.stmt]:
    out = []
    for k, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Continue):
            out.append(ast.copy_location(_set_flag(flag, 1), stmt))
            return out                     # the rest of this block never runs
        if isinstance(stmt, ast.If) and _may_continue([stmt]):
            out.append(ast.copy_location(ast.If(
                test=stmt.test, body=_guard_after_continue(stmt.body, flag),
                orelse=_guard_after_continue(stmt.orelse, flag)), stmt))
            rest = stmts[k + 1:]
            if rest:
                out.append(_unless(flag, _guard_after_continue(rest, flag), rest[0]))
            return out
        out.append(stmt)
    return out


def check_tail_returns(body: list[ast.stmt], source: Source, tail: bool = True) -> int:
    """Reject `return` anywhere but at the end of the function (possibly inside if/else).
    Returns how many returns there are."""
    count = 0
    for k, stmt in enumerate(body):
        last = k == len(body) - 1
        if isinstance(stmt, ast.Return):
            if not (tail and last):
                raise TinyadSyntaxError(
                    "`return` must be the last statement of a ti.func or kernel", source.loc(stmt),
                    hint="store the result in a variable and return it at the end")
            count += 1
        elif isinstance(stmt, ast.If):
            count += check_tail_returns(stmt.body, source, tail and last)
            count += check_tail_returns(stmt.orelse, source, tail and last)
        elif isinstance(stmt, (ast.For, ast.While, ast.With)):
            count += check_tail_returns(stmt.body, source, False)
    return count


def is_leaf(expr) -> bool:
    return isinstance(expr, (ir.Var, ir.Const))
