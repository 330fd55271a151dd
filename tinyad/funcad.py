"""Derivatives of @ti.func functions, callable inside kernels: `ti.ad.grad(f)`, `ti.ad.jvp(f)`,
`ti.ad.vjp(f)` (JAX's spellings and conventions).

A func is inlined and scalarized while its kernel is traced, so its derivative is built then
too: at the call, the differentiated arguments are bound to fresh locals, f's body is traced
into a block of its own, and forward mode (tinyad/autodiff/forward.py `forward_block`) turns
that block into one computing the values and the tangents, with only those locals active.
Fields f reads are constants to its derivative, as globals are to JAX's.

grad and vjp are built from forward sweeps too, one per input component (the funcs are small:
scalars, vectors, matrices). Reverse mode over the block would need the adjoint's save stacks
wherever f loops, and those are no ordinary IR; forward sweeps are ordinary IR, so a kernel
calling a derivative can be differentiated again by a Tape or a FwdMode (second derivatives).

This module is the API layer's: it uses the frontend's tracer and the autodiff transforms, so
neither has to import the other (tests/test_layers.py). The tracer calls `trace_call` on any
callable marked `traces_its_call` (tinyad/frontend/exprs.py).
"""
from __future__ import annotations

import warnings

from tinyad.autodiff.forward import forward_block
from tinyad.core import builder as B
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import NonDifferentiableWarning, TinyadSyntaxError, TinyadTypeError
from tinyad.core.srcloc import user_loc
from tinyad.frontend.matrix import Matrix


def grad(f, argnums=0):
    """`ti.ad.grad(f)(*args)`: d f / d args[argnums] for a scalar-valued func, shaped like that
    argument (a tuple of them where argnums is a tuple)."""
    return FuncDerivative("grad", f, argnums)


def jvp(f, argnums=0):
    """`ti.ad.jvp(f)(*args, *tangents)` -> (f(args), J v): one tangent per differentiated
    argument, shaped like it; J v is shaped like f's value."""
    return FuncDerivative("jvp", f, argnums)


def vjp(f, argnums=0):
    """`ti.ad.vjp(f)(*args, u)` -> (f(args), J^T u): u shaped like f's value; J^T u shaped like
    args[argnums] (a tuple of them where argnums is a tuple)."""
    return FuncDerivative("vjp", f, argnums)


class FuncDerivative:
    """A derivative of a func (or of another derivative): inlined into the calling kernel."""

    traces_its_call = True      # the tracer hands us its call (tinyad/frontend/exprs.py)

    def __init__(self, kind: str, f, argnums):
        if not (getattr(f, "is_tinyad_func", False) or isinstance(f, FuncDerivative)):
            raise TinyadTypeError(f"ti.ad.{kind}() takes a @ti.func (or another ti.ad.{kind}"
                                  f"/jvp/vjp of one), got {type(f).__name__}", user_loc(),
                                  hint="decorate the function with @ti.func")
        self.kind = kind
        self.f = f
        self.several = isinstance(argnums, (tuple, list))
        self.argnums = tuple(argnums) if self.several else (argnums,)
        self.__name__ = f"{kind}({_name(f)})"

    def __call__(self, *args, **kwargs):
        raise TinyadTypeError(f"ti.ad.{self.__name__} can only be called from a kernel or a "
                              "ti.func", hint="wrap the call in a @ti.kernel")

    # ---- tracing a call -------------------------------------------------------------------
    def trace_call(self, tracer, args, kwargs, node):
        loc = tracer.loc(node)
        with B.at(loc):
            extra = {"grad": 0, "jvp": len(self.argnums), "vjp": 1}[self.kind]
            if len(args) < extra:
                raise TinyadTypeError(f"ti.ad.{self.__name__} takes f's arguments then "
                                      f"{extra} more", loc)
            primals, rest = list(args[:len(args) - extra]), list(args[len(args) - extra:])
            for k in self.argnums:
                if not 0 <= k < len(primals):
                    raise TinyadTypeError(f"ti.ad.{self.__name__}: argnums {k} is not one of "
                                          f"the {len(primals)} arguments given", loc)
            inputs = {}                    # argument number -> its float locals, row-major
            for k, value in enumerate(primals):
                if k in self.argnums:
                    primals[k], inputs[k] = _bind(tracer, value, float_only=True)
                elif _is_traced(value):   # a read of the caller's value, not differentiated
                    primals[k], _ = _bind(tracer, value, float_only=False)
            tracer.blocks.append([])
            try:
                result = call_traced(tracer, self.f, primals, kwargs, node)
                if result is None:
                    raise TinyadTypeError(f"ti.ad.{self.__name__}: {_name(self.f)} returns no "
                                          "value to differentiate", loc)
                out_value, outputs = _bind(tracer, result, float_only=True)
            finally:
                body = tracer.blocks.pop()
            _refuse_writes(body, self.__name__)
            if self.kind == "jvp":
                return self._jvp(tracer, body, inputs, outputs, out_value, rest, loc)
            return self._by_components(tracer, body, inputs, outputs, out_value, primals,
                                       rest, loc)

    def _sweep(self, tracer, body, seeds, outputs):
        """Emit one forward sweep of the body; -> the outputs' tangents."""
        stmts, tangent_of, notes = forward_block(body, seeds, tracer.namer)
        for note_loc, op in dict.fromkeys(notes):
            warnings.warn_explicit(
                f"`{op}` has no derivative: ti.ad.{self.__name__} takes it as 0 here (a note, "
                "not an error; use ti.stop_grad(...) to say this is intended)",
                NonDifferentiableWarning, note_loc.file, note_loc.line)
        for s in stmts:
            tracer.emit(s)
        return [tangent_of(v.name) for v in outputs]

    def _jvp(self, tracer, body, inputs, outputs, out_value, tangents, loc):
        seeds = {}
        for k, tangent in zip(self.argnums, tangents):
            entries = _entries(tangent)
            if len(entries) != len(inputs[k]):
                raise TinyadTypeError(f"ti.ad.{self.__name__}: the tangent for argument {k} "
                                      f"has {len(entries)} components, the argument "
                                      f"{len(inputs[k])}", loc)
            seeds.update(zip(inputs[k], entries))
        out_dots = self._sweep(tracer, body, seeds, outputs)
        return out_value, _like(out_value, out_dots)

    def _by_components(self, tracer, body, inputs, outputs, out_value, primals, rest, loc):
        """grad and vjp: J^T u, one forward sweep per input component."""
        if self.kind == "grad":
            if isinstance(out_value, Matrix):
                raise TinyadTypeError(f"ti.ad.{self.__name__}: grad needs a scalar-valued "
                                      f"function, {_name(self.f)} returns shape "
                                      f"{out_value.shape}", loc,
                                      hint="use ti.ad.vjp(f)(x, u) or ti.ad.jvp(f)(x, v)")
            weights = [1]
        else:
            weights = _entries(rest[0])
            if len(weights) != len(outputs):
                raise TinyadTypeError(f"ti.ad.{self.__name__}: u has {len(weights)} "
                                      f"components, {_name(self.f)}'s value {len(outputs)}",
                                      loc)
        if not any(inputs.values()):
            for s in body:              # nothing to differentiate: the value alone
                tracer.emit(s)
        results = []
        for k in self.argnums:
            components = []
            for var in inputs[k]:
                dots = self._sweep(tracer, body, {var: 1}, outputs)
                total = None
                for w, dot in zip(weights, dots):
                    term = dot if weights == [1] else B.binary("mul", w, dot)
                    total = term if total is None else B.binary("add", total, term)
                components.append(tracer.new_local(total, "g"))
            results.append(_like(primals[k], components))
        gradient = tuple(results) if self.several else results[0]
        return gradient if self.kind == "grad" else (out_value, gradient)


def call_traced(tracer, f, args, kwargs, node):
    """Trace a call of a func or of a derivative at the tracer's current position."""
    if isinstance(f, FuncDerivative):
        return f.trace_call(tracer, args, kwargs, node)
    return tracer.inline(f, args, kwargs, node)


def _name(f) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _is_traced(value) -> bool:
    return B.is_expr(value) or isinstance(value, Matrix)


def _entries(value) -> list:
    if isinstance(value, Matrix):
        return list(value.entries)
    if isinstance(value, (tuple, list)):
        return list(value)
    return [value]


def _like(template, entries):
    """`entries` shaped like `template` (a Matrix or a scalar)."""
    if isinstance(template, Matrix):
        return template._like(list(entries))
    return entries[0]


def _bind(tracer, value, float_only: bool):
    """Bind each component of a scalar or Matrix value to a fresh local of the current block
    (integers become the default float where float_only) -> (the value over the locals, the
    locals)."""
    if not (_is_traced(value) or isinstance(value, (int, float))):
        raise TinyadTypeError(f"a derivative of a func takes and returns scalars, vectors "
                              f"and matrices, not a {type(value).__name__}", B.current_loc())
    locals_ = []
    for entry in _entries(value):
        dtype = entry.dtype if B.is_expr(entry) else B.python_dtype(entry)
        if float_only and not dtype.is_float:
            dtype = T.typing_defaults().fp
        locals_.append(tracer.new_local(B.cast(entry, dtype), "x"))
    return _like(value, locals_), locals_


def _refuse_writes(body, what: str):
    """A derivative covers f's value only: a func that writes fields has effects it misses."""
    for s in ir.walk_stmts(body):
        if isinstance(s, (ir.Store, ir.AtomicOp)):
            raise TinyadSyntaxError(
                f"ti.ad.{what}: the function writes the field {s.field.name}, and its "
                "derivative covers only its return value", s.loc,
                hint="differentiate a func that only computes and returns a value; write "
                     "fields in the kernel that calls it")
