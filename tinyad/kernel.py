"""`@ti.kernel` and `@ti.func`: tracing on first call, running, recording on the active Tape."""
from __future__ import annotations

import functools
import inspect
import numbers
import warnings

import numpy as np

from tinyad.autodiff.forward import forward
from tinyad.autodiff.reverse import reverse
from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import (
    NonDifferentiableWarning,
    TinyadError,
    TinyadInternalError,
    TinyadTypeError,
    internal_error,
    without_internal_frames,
)
from tinyad.core.srcloc import user_loc
from tinyad.core.wellformed import check_wellformed
from tinyad.field import settle_layout
from tinyad.frontend import lang
from tinyad.frontend.matrix import Matrix
from tinyad.frontend.scope import Source
from tinyad import undo
from tinyad.frontend.tracer import parameter_kinds, trace_kernel
from tinyad.runtime import active_forward_mode, active_recorder, note, runtime


def _user_facing(call):
    """Run `call`; a tinyad error surfaces at the user's call, without tinyad's frames. Any
    other exception is a bug in tinyad: reported as one, at the user's call (the traceback
    that caused it stays chained for the bug report)."""
    try:
        return call()
    except TinyadInternalError as exc:   # keep its cause: the bug report needs tinyad's frames
        raise exc.with_traceback(None)  # noqa: B904
    except TinyadError as exc:
        raise without_internal_frames(exc) from None
    except KeyboardInterrupt as exc:   # Ctrl-C in a long launch: stop at the user's call
        raise exc.with_traceback(None) from None
    except Exception as exc:  # noqa: BLE001  (tinyad's own failure, not the user's mistake)
        raise internal_error(exc, user_loc()) from exc


class Func:
    """A @ti.func: inlined into the kernels that call it."""

    is_tinyad_func = True     # how the frontend recognises one (frontend/exprs.py)

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self._source = None

    @property
    def source(self) -> Source:
        if self._source is None:
            self._source = Source.of(self.fn)
        return self._source

    def __get__(self, instance, owner=None):
        return self if instance is None else BoundFunc(self, instance)

    def bound_arguments(self, args):
        return args

    def __call__(self, *args, **kwargs):
        raise TinyadTypeError(f"ti.func {self.fn.__name__} can only be called from a kernel or "
                              "another ti.func", hint="wrap the call in a @ti.kernel")


class Kernel:
    """A @ti.kernel. Traced to IR on first call (and per template argument set)."""

    is_tinyad_kernel = True

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self.signature = inspect.signature(fn)
        self._kinds = None
        self._traces: dict = {}
        self._last_key = None
        self.grad = AdjointKernel(self)
        self.fwd = TangentKernel(self)
        self.is_no_grad = False

    def __get__(self, instance, owner=None):
        """A kernel defined in a class (Taichi's ti.data_oriented): `obj.step(...)` passes `obj`
        as the template argument `self`, so its fields are read at trace time."""
        return self if instance is None else BoundKernel(self, instance)

    # ---- arguments --------------------------------------------------------------------------
    def kinds(self):
        if self._kinds is None:
            self._kinds = parameter_kinds(self.fn)
        return self._kinds

    def bind(self, args, kwargs):
        """-> (template values, flat scalar values for the IR's arguments)."""
        kinds = self.kinds()
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TinyadTypeError(f"{self.fn.__name__}(): {exc}",
                                  hint=f"its parameters: {self.fn.__name__}{self.signature}"
                                  ) from None
        bound.apply_defaults()
        templates, scalars = {}, []
        for name, value in bound.arguments.items():
            kind = kinds[name]
            if kind == "template":
                templates[name] = value
            elif isinstance(kind, (lang.VectorType, lang.MatrixType)):
                entries = value.entries if isinstance(value, Matrix) else np.ravel(value).tolist()
                scalars.extend(_check_scalar(self, name, e, T.f32) for e in entries)
            elif isinstance(kind, T.DType):
                scalars.append(_check_scalar(self, name, value, kind))
        return templates, tuple(scalars)

    def _key(self, templates):
        return (runtime.generation, runtime.config.default_fp, runtime.config.default_ip,
                tuple((n, _template_key(v)) for n, v in templates.items()))

    def ir_for(self, templates) -> TracedKernel:
        key = self._key(templates)
        if key not in self._traces:
            kernel = trace_kernel(self.fn, templates, self.fn.__name__)
            self._traces[key] = TracedKernel(check_wellformed(kernel))
        self._last_key = key
        return self._traces[key]

    @property
    def ir(self) -> ir.Kernel:
        """The IR of the last call (traced now if the kernel takes no template arguments)."""
        return self._traced_for_inspection().ir

    def _traced_for_inspection(self) -> TracedKernel:
        if self._last_key is None:
            if any(k == "template" for k in self.kinds().values()):
                raise TinyadTypeError(f"{self.fn.__name__} takes template arguments: call it once "
                                      "before asking for its IR")
            return _user_facing(lambda: self.ir_for({}))
        return self._traces[self._last_key]

    # ---- launching ----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        return _user_facing(lambda: self._launch(args, kwargs))

    def _launch(self, args, kwargs):
        settle_layout()
        templates, scalars = self.bind(args, kwargs)
        traced = self.ir_for(templates)
        if active_forward_mode.get() is not None:   # inside ti.ad.FwdMode: values and tangents
            result, launch = traced.run_tangent(scalars)
        else:
            result, launch = traced.run_primal(scalars)
        recorder = active_recorder.get()
        if recorder is not None:
            recorder.record(self, args, kwargs, launch)
        return result


class BoundKernel:
    """`obj.step` for a kernel method: calls (and `.grad` calls) pass `obj` first."""

    def __init__(self, kernel: Kernel, instance):
        self.kernel, self.instance = kernel, instance

    def __call__(self, *args, **kwargs):
        return self.kernel(self.instance, *args, **kwargs)

    @property
    def grad(self):
        return functools.partial(self.kernel.grad, self.instance)


class BoundFunc:
    """`self.helper` for a ti.func method, seen while tracing: inlined with `self` first."""

    is_tinyad_func = True

    def __init__(self, func: "Func", instance):
        self.fn, self.instance, self.func = func.fn, instance, func

    @property
    def source(self):
        return self.func.source

    def bound_arguments(self, args):
        return (self.instance, *args)


def data_oriented(cls):
    """`@ti.data_oriented`: a class whose methods may be kernels and funcs. Nothing to do in
    tinyad: kernels and funcs bind `self` themselves (Kernel.__get__, Func.__get__)."""
    return cls


class AdjointKernel:
    """`kernel.grad`: the reverse-mode adjoint of a kernel, built from its IR on first use."""

    def __init__(self, primal: Kernel):
        self.primal = primal

    def __call__(self, *args, **kwargs):
        return _user_facing(lambda: self._launch(args, kwargs))

    def replay(self, args, kwargs, launch):
        """The Tape's call: the adjoint of one recorded launch."""
        return _user_facing(lambda: self._launch(args, kwargs, launch, manual=False))

    def _launch(self, args, kwargs, launch=None, manual=True):
        if self.primal.is_no_grad:
            return None
        templates, scalars = self.primal.bind(args, kwargs)
        self.primal.ir_for(templates).run_adjoint(scalars, launch, manual)
        return None

    @property
    def ir(self) -> ir.Kernel:
        traced = self.primal._traced_for_inspection()
        return _user_facing(traced.adjoint_ir)


class TangentKernel:
    """`kernel.fwd`: the forward-mode (tangent) variant of a kernel, built on first use. Kernels
    launched inside ti.ad.FwdMode run it; `kernel.fwd.ir` shows it."""

    def __init__(self, primal: Kernel):
        self.primal = primal

    @property
    def ir(self) -> ir.Kernel:
        traced = self.primal._traced_for_inspection()
        return _user_facing(lambda: traced.variant_ir("tangent"))


def _adjoint_ir(traced: "TracedKernel") -> ir.Kernel:
    traced.notes = []
    return reverse(traced.ir, traced.notes)


def _tangent_ir(traced: "TracedKernel") -> ir.Kernel:
    traced.dropped_tangents = []
    return forward(traced.ir, traced.notes, traced.dropped_tangents)


def _adjoint_tangent_ir(traced: "TracedKernel") -> ir.Kernel:
    """Forward over reverse: the adjoint kernel's tangent (a Hessian-vector product's kernel),
    its .grad fields' tangents in their .dual."""
    traced.dropped_adjoint_tangents = []
    return forward(traced.variant_ir("adjoint"), [], traced.dropped_adjoint_tangents)


class TracedKernel:
    """One traced kernel: its IR, the variants derived from it, and a program per variant from
    the backend of this ti.init (tinyad/backend.py)."""

    # How each variant's IR is derived from the primal IR, on first use. A new kind of
    # derivative is one more entry here.
    DERIVED = {"adjoint": _adjoint_ir, "tangent": _tangent_ir,
               "adjoint_tangent": _adjoint_tangent_ir}

    def __init__(self, kernel_ir: ir.Kernel):
        self.ir = kernel_ir
        self._variants = {"primal": kernel_ir}
        self._programs = {}
        self._written = {}     # variant -> the fields it writes (what a failed launch restores)
        self.notes = []        # (loc, op) where reverse mode cuts a gradient path
        self.facts = None      # the rule checker's facts about this kernel (tinyad/check/launches.py)
        self.dropped_tangents = []   # (field, loc): stores that lose a tangent (no .dual)
        self.dropped_adjoint_tangents = []   # the same, in the adjoint's tangent

    def variant_ir(self, variant: str) -> ir.Kernel:
        if variant not in self._variants:
            self._variants[variant] = self.DERIVED[variant](self)
        return self._variants[variant]

    def adjoint_ir(self) -> ir.Kernel:
        return self.variant_ir("adjoint")

    def program(self, variant: str):
        """The backend's program for a variant, prepared on first use."""
        if variant not in self._programs:
            kernel_ir = self.variant_ir(variant)
            if variant == "adjoint":
                runtime.backend.backward_starts(self)
            self._programs[variant] = runtime.backend.prepare(kernel_ir)
        return self._programs[variant]

    def has_program(self, variant: str) -> bool:
        return variant in self._programs

    def _warn_non_differentiable(self):
        """Once per kernel, when its gradient first runs: where gradient paths are cut."""
        for loc, op in self.notes:
            warnings.warn_explicit(
                f"`{op}` has no derivative: no gradient flows back through it (a note, not an "
                "error; use ti.stop_grad(...) to say this is intended)",
                NonDifferentiableWarning, loc.file, loc.line)
        self.notes = []

    def launch(self, variant: str, scalars, *rest):
        """Launch a variant on the backend, undoably (tinyad/undo.py: a launch or Tape that
        fails part way leaves the fields as they were)."""
        written = self._written.get(variant)
        if written is None:
            written = self._written[variant] = undo.written_fields(self.variant_ir(variant))
        return undo.run_undoable(written, lambda: runtime.backend.launch(self, variant, scalars,
                                                                         *rest))

    def run_primal(self, scalars):
        """Run the kernel; -> (its return value, the checker's record of this launch or None)."""
        return self.launch("primal", scalars)

    def run_tangent(self, scalars):
        """Run the tangent kernel (forward mode); -> (its return value, None)."""
        self.program("tangent")
        self._warn_non_differentiable()
        return self.launch("tangent", scalars)

    def run_adjoint(self, scalars, record=None, manual=True):
        """Run the adjoint kernel for a primal launch (found by its arguments if not given);
        inside ti.ad.FwdMode its tangent variant (forward over reverse)."""
        variant = "adjoint_tangent" if active_forward_mode.get() is not None else "adjoint"
        self.program(variant)
        self._warn_non_differentiable()
        if variant == "adjoint_tangent":
            self.launch(variant, scalars)
            return
        self.launch("adjoint", scalars, record, manual)


def _check_scalar(kernel, name, value, dtype: T.DType):
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if not isinstance(value, (numbers.Number, np.generic)) or isinstance(value, complex):
        raise TinyadTypeError(f"{kernel.fn.__name__}(): argument '{name}' is declared {dtype}, "
                              f"got {type(value).__name__}",
                              hint="pass a number; a field is passed as `name: ti.template()`")
    if dtype.is_int and not float(value).is_integer():
        raise TinyadTypeError(f"{kernel.fn.__name__}(): argument '{name}' is declared {dtype}, "
                              f"got the non-integer {value!r}",
                              hint=f"pass an integer, or declare `{name}: ti.f32`")
    return value


def _template_key(value):
    if isinstance(value, (numbers.Number, str, bool, type(None))):
        return (type(value).__name__, value)
    if isinstance(value, tuple):
        return tuple(_template_key(v) for v in value)
    return ("id", id(value))


def kernel(fn=None, **_options):
    """`@ti.kernel`: mark a function as a kernel."""
    if fn is None:
        return lambda f: Kernel(f)
    return Kernel(fn)


def func(fn=None, **_options):
    """`@ti.func`: a function inlined into the kernels that call it."""
    if fn is None:
        return lambda f: Func(f)
    return Func(fn)


def real_func(fn):
    note(f"ti.real_func {fn.__name__} is inlined like a ti.func in tinyad")
    return Func(fn)
