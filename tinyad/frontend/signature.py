"""Frontend: what a kernel's `def` line may use.

A kernel's parameters become the IR's arguments, one value each, passed by position or name.
Python's other parameter forms have no such meaning, and `async def` would make calling the
kernel return a coroutine that never runs: each is refused at the `def` line, before tracing.
"""
from __future__ import annotations

import ast

from tinyad.core.errors import TinyadSyntaxError


def check_kernel_signature(source) -> None:
    """Raise a TinyadSyntaxError at the `def` line for a signature a kernel may not have."""
    tree, where = source.tree, source.loc(source.tree)
    if isinstance(tree, ast.AsyncFunctionDef):
        raise TinyadSyntaxError("a kernel cannot be an `async def`", where,
                                hint="write `def`: a kernel runs to completion when called")
    args = tree.args
    if args.vararg is not None:
        raise TinyadSyntaxError(f"a kernel cannot take `*{args.vararg.arg}`", where,
                                hint="give each argument its own annotated parameter, or pass "
                                     "a ti.template() tuple")
    if args.kwarg is not None:
        raise TinyadSyntaxError(f"a kernel cannot take `**{args.kwarg.arg}`", where,
                                hint="give each argument its own annotated parameter")
    if args.kwonlyargs:
        names = ", ".join(a.arg for a in args.kwonlyargs)
        raise TinyadSyntaxError(f"a kernel cannot have keyword-only arguments ({names})", where,
                                hint="drop the `*` and list them with the other parameters")
