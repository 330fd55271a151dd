"""Frontend: what a kernel's `def` line may use, and what its parameters' annotations mean.

A kernel's parameters become the IR's arguments, one value each, passed by position or name.
Python's other parameter forms have no such meaning, and `async def` would make calling the
kernel return a coroutine that never runs: each is refused at the `def` line, before tracing.
"""
from __future__ import annotations

import ast
import inspect

from tinyad.core import types as T
from tinyad.core.errors import TinyadSyntaxError, TinyadTypeError
from tinyad.frontend import lang
from tinyad.frontend.scope import Source
from tinyad.frontend.structs import StructType


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


def resolve_annotation(annotation):
    """A kernel or func parameter annotation -> 'template', a dtype, or a vector/matrix type."""
    if annotation is lang.template or isinstance(annotation, lang.template):
        return "template"
    if isinstance(annotation, (lang.VectorType, lang.MatrixType, lang.NdarrayType, StructType)):
        return annotation
    return T.resolve_dtype(annotation)


def parameter_kinds(fn, source: Source | None = None) -> dict:
    """Each kernel parameter's kind: 'template', a dtype, or a vector/matrix type."""
    source = source or Source.of(fn)
    check_kernel_signature(source)
    kinds = {}
    for k, (pname, param) in enumerate(inspect.signature(fn).parameters.items()):
        if k == 0 and pname == "self" and param.annotation is inspect.Parameter.empty:
            kinds[pname] = "template"      # a method of a ti.data_oriented class
            continue
        if param.annotation is inspect.Parameter.empty:
            node = next(a for a in source.tree.args.args if a.arg == pname)
            raise TinyadSyntaxError(f"kernel argument '{pname}' needs a type annotation",
                                    source.loc(node), hint=f"write `{pname}: ti.f32` or "
                                    f"`{pname}: int` (a number), `{pname}: ti.types.ndarray()` "
                                    f"(a numpy array) or `{pname}: ti.template()` (a field)")
        kinds[pname] = resolve_annotation(eval_annotation(param.annotation, fn))
        if isinstance(kinds[pname], StructType):
            source = source or Source.of(fn)
            node = next(a for a in source.tree.args.args if a.arg == pname)
            raise TinyadTypeError(f"kernel argument '{pname}' is a struct: tinyad kernels take "
                                  "scalars, vectors, matrices and templates", source.loc(node),
                                  hint="pass the members as separate arguments, or the struct "
                                  "field as a ti.template()")
    return kinds


def eval_annotation(annotation, fn):
    if isinstance(annotation, str):
        return eval(annotation, fn.__globals__)  # noqa: S307  (`from __future__ import annotations`)
    return annotation
