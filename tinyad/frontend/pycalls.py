"""Frontend: what a failure while tracing means, and plain Python calls a kernel may not make.

A kernel may call plain Python functions: they run once, while the kernel is traced (as in
Taichi), so `math.sqrt(2.0)` becomes a constant. Two mistakes hide there. A function whose result
changes from call to call (`random.random()`) would give every element the same number: refused.
A function that cannot take a kernel value (`math.sin(x[i])`) fails inside its own code: said
plainly, with the tinyad function to use instead.

Any other exception while tracing is sorted by where it was raised: in the user's own code it is
the user's error at their line; in tinyad's own code it is a bug in tinyad, reported as such
(core/errors.py's `internal_error`), never dressed up as a mistake of the user's.
"""
from __future__ import annotations

import inspect
import operator
import os
import sysconfig

from tinyad.core.errors import TinyadError, TinyadSyntaxError, TinyadTypeError, internal_error
from tinyad.core.srcloc import SrcLoc

# Modules whose functions return something new on each call (or depend on the outside world).
STATEFUL_MODULES = ("random", "numpy.random", "time", "datetime", "secrets", "uuid", "os")

_LIBRARY_DIRS = tuple(os.path.join(p, "") for p in {sysconfig.get_paths()[key] for key in
                                                   ("stdlib", "platstdlib", "purelib", "platlib")})


# Builtins that make text: in a kernel, of a value known only when it runs, they would show
# the IR node the tracer holds (`x[Var(name='i', dtype=i32)]`) instead of a number.
_TEXT_MAKERS = (str, repr, format, ascii)


def refuse_text_of_kernel_value(fn, args: tuple, loc: SrcLoc, traced) -> None:
    """`"x = " + str(x[i])` in a kernel: a kernel cannot build strings at run time."""
    if fn in _TEXT_MAKERS and any(traced(a) for a in args):
        raise TinyadTypeError(f"{fn.__name__}() of a value known only when the kernel runs: a "
                              "kernel cannot build strings or messages at run time", loc,
                              hint="give print() the values (print('x =', x[i])) or use an "
                                   "f-string (f'x = {x[i]}'), in print or an assert's message")


def module_of(fn) -> str:
    """The module a function comes from; a bound method of a module's hidden instance (such as
    `random.random`, a method of random's Random()) counts as that module's."""
    module = getattr(fn, "__module__", None)
    if not module and hasattr(fn, "__self__"):
        module = type(fn.__self__).__module__
    return module or ""


def refuse_stateful_call(fn, loc: SrcLoc) -> None:
    """`random.random()` in a kernel: it would run once, at trace time, and every element would
    get that one number. Taichi does the same silently; tinyad refuses."""
    module = module_of(fn)
    if not any(module == m or module.startswith(m + ".") for m in STATEFUL_MODULES):
        return
    name = f"{module.split('.')[0]}.{getattr(fn, '__name__', 'function')}"
    hint = "use ti.random() (a new number per call, per element)" if "random" in module else \
        "compute the value in Python scope and pass it as a kernel argument"
    raise TinyadSyntaxError(f"{name}() is a Python function: in a kernel it would run once, "
                            "while the kernel is traced, and give every run the same value",
                            loc, hint=hint)


def _owner(frame) -> str:
    """'tinyad', 'library' (the standard library, installed packages) or 'user'."""
    if frame.f_globals.get("__name__", "").split(".")[0] == "tinyad":
        return "tinyad"
    filename = frame.f_code.co_filename
    if filename.startswith("<") or os.path.abspath(filename).startswith(_LIBRARY_DIRS):
        return "library"
    return "user"


def _callee_owners(exc: BaseException) -> list[str]:
    """Who owns each frame the exception passed through below the frame that caught it."""
    owners, tb = [], exc.__traceback__
    tb = tb.tb_next if tb is not None else None     # the first frame is the one that caught it
    while tb is not None:
        owners.append(_owner(tb.tb_frame))
        tb = tb.tb_next
    return owners


def _tinyad_equivalent(name: str) -> str | None:
    from tinyad.frontend import lang, math  # noqa: PLC0415  (only on a mistake)
    for module, prefix in ((math, "ti."), (lang, "ti.")):
        if hasattr(module, name) and callable(getattr(module, name)):
            return prefix + name
    return None


def call_failure(fn, args: tuple, exc: Exception, loc: SrcLoc, *,
                 traced_args: bool) -> TinyadError:
    """The error for `fn(*args)`, called while tracing the user's line `loc`, raising `exc`."""
    owners = _callee_owners(exc)
    if fn is operator.getitem and isinstance(exc, (KeyError, IndexError)):
        container, key = args   # `outs["c"]`: a dict, list or tuple built outside the kernel
        kind = type(container).__name__
        if isinstance(exc, KeyError):
            keys = ", ".join(repr(k) for k in list(container)[:8]) \
                if hasattr(container, "keys") else ""
            return TinyadTypeError(f"this {kind} has no key {key!r}", loc,
                                   hint=f"its keys are {keys}" if keys else "check the key")
        return TinyadTypeError(f"index {key!r} is out of range for this {kind} of length "
                               f"{len(container)}", loc, hint="check the index")
    name = getattr(fn, "__name__", None) or repr(fn)
    if "user" in owners:       # the user's own helper failed: their error, in their words
        return TinyadTypeError(f"{name}() raised {type(exc).__name__} while the kernel was "
                               f"traced: {exc}", loc, hint=f"{name} runs in Python while the "
                               "kernel is traced: the chained traceback shows where it failed")
    if owners and owners[0] == "tinyad":
        return internal_error(exc, loc)
    if traced_args and not module_of(fn).startswith("tinyad"):
        short = getattr(fn, "__name__", "")
        equivalent = _tinyad_equivalent(short)
        full = f"{module_of(fn).split('.')[0]}.{short}" if module_of(fn) else name
        return TinyadTypeError(
            f"{full}() is a Python function and cannot take a kernel value: it runs once, while "
            "the kernel is traced", loc,
            hint=f"use {equivalent}" if equivalent else "write it as a @ti.func")
    if isinstance(exc, ArithmeticError):    # `1 // 0` of two constants, folded while tracing
        return TinyadTypeError(f"{exc} in a value computed while the kernel is traced", loc,
                               hint="check the constants in this expression")
    signature = _signature(fn)
    return TinyadTypeError(f"{name}(): {exc}", loc,
                           hint=f"its parameters: {name}{signature}" if signature else
                           "check the arguments of this call")


def _signature(fn) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):     # a builtin without one
        return ""


def trace_failure(exc: Exception, loc: SrcLoc) -> TinyadError:
    """The error for an exception (not a tinyad error) that escaped tracing the user's `loc`."""
    owners = _callee_owners(exc)
    if "user" in owners:       # e.g. a property of the user's own object
        return TinyadTypeError(f"{type(exc).__name__} while the kernel was traced: {exc}", loc,
                               hint="your code raised it while the kernel was traced: the "
                                    "chained traceback shows where")
    if isinstance(exc, ArithmeticError):    # `1 / 0` of two constants, folded while tracing
        return TinyadTypeError(f"{exc} in a value computed while the kernel is traced", loc,
                               hint="check the constants in this expression")
    return internal_error(exc, loc)
