"""Every error tinyad raises on purpose. Each one names the user's source line when it has one."""
from __future__ import annotations

import difflib
import shutil
import sys
import textwrap

from tinyad.core.srcloc import SrcLoc, user_loc


class TinyadError(Exception):
    """Base class. `loc` is the user's source location: where given, the line in a kernel; else
    the user's line that called into tinyad from Python scope (None when there is none)."""

    def __init__(self, message: str, loc: SrcLoc | None = None, hint: str = ""):
        self.message = message
        self.loc = loc if loc is not None else user_loc()
        self.hint = hint
        super().__init__(self._render())

    def __str__(self) -> str:
        """The message, wrapped between words where stderr is a terminal (Python prints it
        after `tinyad.Name: `; the terminal itself would cut words in two)."""
        cls = type(self)
        return wrapped_for_stderr(self.unwrapped(), len(f"{cls.__module__}.{cls.__qualname__}: "))

    def unwrapped(self) -> str:
        """The message as one line per part, unwrapped."""
        return super().__str__()

    def _render(self) -> str:
        parts = [self.message]
        if self.loc is not None:
            parts.append(self.loc.snippet())
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


def wrapped_for_stderr(text: str, taken: int = 0) -> str:
    """`text` as is in a pipe; in a terminal each of its lines wrapped at the terminal's width
    between words, continuations indented two more than their line. A source location stays
    whole: its `File "..."` line, and lines indented four or more (code, carets). `taken`: the
    columns already used before the first line (an exception's `tinyad.Name: `)."""
    if not sys.stderr.isatty():
        return text
    width, out = shutil.get_terminal_size().columns, []
    for n, line in enumerate(text.splitlines()):
        if line.startswith(("    ", 'File "')):
            out.append(line)
            continue
        lead = " " * taken if n == 0 else ""
        indent = line[:len(line) - len(line.lstrip())]
        out.append(textwrap.fill(line, width, initial_indent=lead,
                                 subsequent_indent=indent + "  ", break_long_words=False,
                                 break_on_hyphens=False)[len(lead):])
    return "\n".join(out)


def without_internal_frames(exc: TinyadError) -> TinyadError:
    """A tinyad error, made to surface at the user's call rather than deep in tinyad: its
    message already names the user's line. Use as `raise without_internal_frames(e) from None`."""
    return exc.with_traceback(None)


class TinyadSyntaxError(TinyadError, SyntaxError):
    """A construct a kernel may not use. Also a SyntaxError, so Python shows file, line and
    caret."""

    def __init__(self, message: str, loc: SrcLoc, hint: str = ""):
        self.message, self.loc, self.hint = message, loc, hint
        end = (loc.end_col + 1) if loc.end_col is not None else None
        # Python prints a SyntaxError as `tinyad.TinyadSyntaxError: <msg>`, not through
        # __str__: its msg is wrapped here, as __str__ wraps the other errors' messages
        cls = type(self)
        msg = wrapped_for_stderr(self._message_and_hint(),
                                 len(f"{cls.__module__}.{cls.__qualname__}: "))
        SyntaxError.__init__(self, msg, (loc.file, loc.line, loc.col + 1, loc.text + "\n",
                                         loc.line, end))

    def _message_and_hint(self) -> str:
        return self.message + (f"\nhint: {self.hint}" if self.hint else "")

    def unwrapped(self) -> str:
        return f"{self._message_and_hint()}\n{self.loc.snippet()}"


class TinyadTypeError(TinyadError, TypeError):
    """A value of the wrong type or shape in a kernel, a kernel argument or a field operation."""


class TinyadValueError(TinyadError, ValueError):
    """An argument of the right type but a wrong value (ti.init(mode="gpu"))."""


class TinyadIndexError(TinyadError, IndexError):
    """A field index outside the field's shape."""


def out_of_bounds(field, index: tuple, loc: SrcLoc | None) -> TinyadIndexError:
    """The error for an access to `field` at `index` (its indices, then the element's
    components) outside its shape, at the user's line `loc`: the same words in every mode."""
    ndim = len(field.shape)
    user, component = index[:ndim], index[ndim:]
    offset = getattr(field, "offset", None)      # offset=: storage index + offset = user's
    if offset:
        user = tuple(int(i) + o for i, o in zip(user, offset))
    where = f"index {tuple(int(i) for i in user)}"
    if component:
        where += f" (component {tuple(int(c) for c in component)})"
    return _outside(field, where, "", loc)


def reached_out_of_bounds(field, dim: int, index: int, launch: str,
                          loc: SrcLoc | None) -> TinyadIndexError:
    """The error for a launch that, as its IR shows, reaches `index` (a storage index) in
    dimension `dim` of `field`, outside its shape (tinyad/check/reached.py); `launch` says which
    launch, with which arguments ("this launch (t=3)")."""
    offset = getattr(field, "offset", None)
    user = index + offset[dim] if offset else index
    return _outside(field, f"index {user} in dimension {dim}",
                    f": {launch} reaches it (found from the kernel's IR before the launch)", loc)


def _outside(field, where: str, why: str, loc: SrcLoc | None) -> TinyadIndexError:
    offset = getattr(field, "offset", None)
    extra = f" with {field.element_shape} elements" if field.element_shape else ""
    if offset:
        extra += f" and offset {offset}"
    return TinyadIndexError(f"{where} is out of bounds for field {field.name} of shape "
                            f"{field.shape}{extra}{why}", loc,
                            hint=f"{index_range(field.shape, offset)}; check the loop range "
                                 "and any i + 1 or i - 1")


def index_range(shape: tuple, offset: tuple | None) -> str:
    """Which indices a field takes, for a bounds error's hint."""
    if not offset:
        return "each index i must satisfy 0 <= i < its extent"
    return "the indices run over " + " x ".join(f"[{o}, {o + n})" for o, n in zip(offset, shape))


class TinyadRuntimeError(TinyadError, RuntimeError):
    """Misuse at run time: Tape misuse, a missing gradient field, uninitialised tinyad."""


def division_by_zero(loc: SrcLoc | None) -> TinyadRuntimeError:
    """Integer `//` or `%` by zero at the user's line: the same words in every mode."""
    return TinyadRuntimeError("integer division by zero (`//` or `%` with a zero right-hand side)",
                              loc, hint="check the divisor first, or divide floats (a float "
                                        "division by zero gives inf or nan, as in Taichi)")


def negative_int_power(loc: SrcLoc | None) -> TinyadRuntimeError:
    """An integer `**` a negative integer at the user's line (interp mode checks it always)."""
    return TinyadRuntimeError("an integer to a negative integer power (`**`) is not an integer",
                              loc, hint="check the exponent first, or make the base a float")


class TinyadAttributeError(TinyadError, AttributeError):
    """`ti.<name>` for a name tinyad does not have (a typo, or a Taichi feature left out)."""


def missing_name(prefix: str, name: str, known, left_out: dict,
                 unknown: str) -> TinyadAttributeError:
    """The error for `<prefix>.<name>` (`ti.GUI`, `ti.types.vectr`), a name tinyad lacks:
    the Taichi feature it leaves out and what to do instead (`left_out`: name -> "what: do
    this"), else the message `unknown` and the names among `known` the user probably meant."""
    if name in left_out:
        why = left_out[name]
        return TinyadAttributeError(f"tinyad has no {prefix}.{name}: {why}", user_loc(),
                                    hint=why.split(": ", 1)[-1])
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(f'{prefix}.{c}' for c in close)}?" if close else ""
    return TinyadAttributeError(unknown, user_loc(), hint=hint)


def print_text(template: str, values) -> str:
    """The text a Print shows, and a failed assert's message (core/ir.py Print, Assert): every
    backend formats with this one function."""
    try:
        return template.format(*values)
    except (TypeError, ValueError):   # a value the spec cannot format (a symbolic one)
        return template.format(*(_Shown(v) for v in values))


class _Shown:
    """A value formatted by str() whatever the spec."""
    def __init__(self, value):
        self.value = value

    def __format__(self, spec):
        return str(self.value)


class TinyadAssertionError(TinyadRuntimeError, AssertionError):
    """A failed assertion in a program tinyad runs (Taichi's TaichiAssertionError)."""


def assertion_failed(template: str, values, loc) -> TinyadAssertionError:
    """An `assert` in a kernel that failed, with its message (every backend words it so)."""
    return TinyadAssertionError(print_text(template, values), loc,
                                hint="the assert's condition was false for these values")


class AutodiffRuleError(TinyadError):
    """A program whose gradient would be wrong. Subclasses name the rule."""


class KernelSimplicityRuleError(AutodiffRuleError):
    """A loop shape the reverse-mode transform cannot differentiate."""


class GradientMismatchError(TinyadError):
    """The autodiff gradient disagrees with an independent truth (sympy's derivative of the
    program's formula, or finite differences). `report` holds the element-by-element comparison
    (`report.to_dict()` for tools)."""

    def __init__(self, message: str, report=None, hint: str = ""):
        self.report = report
        super().__init__(message, None, hint)


class TinyadInternalError(TinyadError, RuntimeError):
    """An exception from tinyad's own code that is not a tinyad error: a bug in tinyad, not in
    the user's program. It names the user's line that was being traced or launched; the original
    exception is its __cause__."""


INTERNAL = "internal error in tinyad (this is a bug in tinyad, please report it)"


def internal_error(exc: BaseException, loc: SrcLoc | None) -> TinyadInternalError:
    """The report for `exc`, raised by tinyad's own code while it handled the user's `loc`.
    Raise it `from exc`, so that the internal traceback stays available for the bug report."""
    return TinyadInternalError(f"{INTERNAL}: {type(exc).__name__}: {exc}", loc,
                               hint="the line above is where your program was when tinyad "
                                    "failed; the chained traceback shows where in tinyad")


class NonDifferentiableWarning(UserWarning):
    """A note: an operation without a derivative (floor, round, an int cast, a comparison) sits
    on a gradient path, so no gradient flows through it."""
