"""`@ti.kernel` and `@ti.func`: tracing on first call, running, recording on the active Tape."""
from __future__ import annotations

import functools
import inspect
import numbers
import warnings

import numpy as np

from tinyad import undo
from tinyad.arrayparams import bind, bind_arrays, set_bound
from tinyad.autodiff.forward import forward
from tinyad.autodiff.reverse import reverse
from tinyad.check.accessrecord import checked_ir
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
from tinyad.core.printer import format_kernel
from tinyad.core.srcloc import user_loc
from tinyad.core.wellformed import check_wellformed
from tinyad.explain import compact_ir
from tinyad.field import settle_layout, unrequested_grads
from tinyad.frontend import lang
from tinyad.frontend.matrix import Matrix
from tinyad.frontend.tracer import parameter_kinds, trace_kernel
from tinyad.launch import run as run_launch
from tinyad.ndarray import as_argument, parameter, trace_signature
from tinyad.runtime import active_capture, active_forward_mode, active_recorder, runtime
from tinyad.taichi_internals import AutodiffMode


def _user_facing(call):
    """Run `call`; what it raises surfaces as `_surface` says."""
    try:
        return call()
    except BaseException as exc:
        _surface(exc)
        raise


def _surface(exc: BaseException) -> None:
    """Called while `exc`, raised under a user's call, is handled: a tinyad error surfaces at
    the user's call, without tinyad's frames; any other exception tinyad raised is a bug in
    tinyad, reported as one at the user's call (the traceback that caused it stays chained for
    the bug report). Returns (the caller re-raises `exc` as it is) when the user's own code
    raised it (a signal handler, a callback) or it is no Exception (SystemExit)."""
    if isinstance(exc, TinyadInternalError):   # keep its cause: the bug report needs its frames
        raise exc.with_traceback(None)
    if isinstance(exc, TinyadError):
        raise without_internal_frames(exc) from None
    if isinstance(exc, KeyboardInterrupt):     # Ctrl-C in a long launch: stop at the user's call
        raise exc.with_traceback(None) from None
    if isinstance(exc, Exception) and _raised_in_tinyad(exc):   # tinyad's own failure
        raise internal_error(exc, user_loc()) from exc


def _raised_in_tinyad(exc: BaseException) -> bool:
    """Whether the innermost frame of `exc`'s traceback is tinyad's (its generated kernel
    modules included) rather than the user's."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is None or tb.tb_frame.f_globals.get("__name__", "").startswith("tinyad")


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
        self._last_plain = None   # (key, trace) of the last launch without template arguments
        self._scalar_params = None   # set by kinds(): ((name, dtype), ...) if all are scalars
        self.grad = AdjointKernel(self)
        self.fwd = VariantView(self, lambda traced: traced.variant_ir("tangent"),
                               AutodiffMode.FORWARD)
        self.checked = VariantView(self, lambda traced: traced.memos[checked_ir],
                                   AutodiffMode.NONE)
        self.is_no_grad = False
        self.trusted = False      # ti.ad.trust: a gradient written by hand, not compared
        self.autodiff_mode = AutodiffMode.NONE   # VALIDATION while in Tape(validation=True)

    def __get__(self, instance, owner=None):
        """A kernel defined in a class (Taichi's ti.data_oriented): `obj.step(...)` passes `obj`
        as the template argument `self`, so its fields are read at trace time."""
        return self if instance is None else BoundKernel(self, instance)

    # ---- arguments --------------------------------------------------------------------------
    def kinds(self):
        if self._kinds is None:
            self._kinds = parameter_kinds(self.fn)
            # Every parameter a plain scalar (`t: ti.i32`), positional: a call passing them all
            # by position binds without inspect (2.5 of a 7 us launch went to binding)
            plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in
                        self.signature.parameters.values()) and all(
                isinstance(k, T.DType) for k in self._kinds.values())
            self._scalar_params = tuple(self._kinds.items()) if plain else None
        return self._kinds

    def bind(self, args, kwargs):
        """-> (template values, flat scalar values for the IR's arguments)."""
        if self._kinds is None:
            self.kinds()
        plain = self._scalar_params
        if plain is not None and not kwargs and len(args) == len(plain):
            # (a loop, not a generator: this runs at every launch and every replayed adjoint)
            for (_, kind), value in zip(plain, args):
                if type(value) is not int and (type(value) is not float or not kind.is_float):
                    return {}, tuple(_check_scalar(self, name, value, kind)
                                     for (name, kind), value in zip(plain, args))
            return {}, args if type(args) is tuple else tuple(args)   # (as _check_scalar)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TinyadTypeError(f"{self.fn.__name__}(): {exc}",
                                  hint=f"its parameters: {self.fn.__name__}{self.signature}"
                                  ) from None
        bound.apply_defaults()
        kinds, templates, scalars = self._kinds, {}, []
        for name, value in bound.arguments.items():
            kind = kinds[name]
            if kind == "template":
                templates[name] = value
            elif isinstance(kind, lang.NdarrayType):
                templates[name] = as_argument(value, kind, self.fn.__name__, name)
            elif isinstance(kind, (lang.VectorType, lang.MatrixType)):
                entries = value.entries if isinstance(value, Matrix) else np.ravel(value).tolist()
                scalars.extend(_check_scalar(self, name, e, T.f32) for e in entries)
            elif isinstance(kind, T.DType):
                scalars.append(_check_scalar(self, name, value, kind))
        return templates, tuple(scalars)

    def _key(self, templates):
        kinds = self.kinds()
        return (runtime.generation, runtime.config.default_fp, runtime.config.default_ip,
                tuple((n, trace_signature(v, kinds[n]) if _is_ndarray(kinds[n])
                       else _template_key(v)) for n, v in templates.items()))

    def ir_for(self, templates) -> TracedKernel:
        """The trace for these template values, bound to these ndarray arguments if any (a
        trace is shared by all arrays of one dtype, shape and gradient: tinyad/ndarray.py)."""
        if not templates:     # no template or ndarray arguments: the common launch, kept short
            config, last = runtime.config, self._last_plain
            if last is not None and last[0][0] == runtime.generation and \
                    last[0][1] is config.default_fp and last[0][2] is config.default_ip:
                self._last_key, traced = last
                return traced
            key = (runtime.generation, config.default_fp, config.default_ip, ())
            traced = self._traces.get(key)
            if traced is not None:
                self._last_key = key
                self._last_plain = (key, traced)
                return traced
        kinds = self.kinds()
        arrays = {n: v for n, v in templates.items() if _is_ndarray(kinds[n])}
        key = self._key(templates)
        if key not in self._traces:
            params = {n: parameter(n, a, kinds[n], k) for k, (n, a) in enumerate(arrays.items())}
            kernel = trace_kernel(self.fn, {**templates, **params}, self.fn.__name__)
            self._traces[key] = TracedKernel(check_wellformed(kernel), params)
            self._traces[key].trusted = self.trusted
        self._last_key = key
        traced = self._traces[key]
        if not arrays:
            return traced
        return traced.bound_to(arrays, runtime.backend.arrays_as_parameters)

    @property
    def ir(self) -> ir.Kernel:
        """The IR of the last call (traced now if the kernel takes no template arguments)."""
        return self._traced_for_inspection().ir

    def _traced_for_inspection(self) -> TracedKernel:
        if self._last_key is None:
            if any(k == "template" or _is_ndarray(k) for k in self.kinds().values()):
                raise TinyadTypeError(f"{self.fn.__name__} takes template or ndarray arguments: "
                                      "call it once before asking for its IR")
            return _user_facing(lambda: self.ir_for({}))
        return self._traces[self._last_key]

    def trust(self) -> None:
        """ti.ad.trust: this kernel object's traces (made so far and later) are not compared
        with tinyad's adjoint (tinyad/check/handgrads.py). Another kernel of the same name (a
        factory's next one) is not trusted by it."""
        self.trusted = True
        for traced in self._traces.values():
            traced.trusted = True

    # ---- launching ----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        try:           # (_user_facing written out: two frames fewer at every launch)
            return self._launch(args, kwargs)
        except BaseException as exc:
            _surface(exc)
            raise

    def _launch(self, args, kwargs):
        if unrequested_grads:
            settle_layout()
        templates, scalars = self.bind(args, kwargs)
        traced = self.ir_for(templates)
        if active_forward_mode.get() is not None:   # inside ti.ad.FwdMode: values and tangents
            result, launch = traced.run_tangent(scalars)
        else:
            result, launch = traced.launch("primal", scalars)
        if result is not None and active_capture.get() is not None:
            active_capture.get().returned(self.fn.__name__)
        for value in templates.values():
            if getattr(value, "copy_back_to", None) is not None:   # (tinyad/ndarray.py)
                np.copyto(value.copy_back_to, runtime.backend.storage.to_host(value))
        recorder = active_recorder.get()
        if recorder is not None:
            self.last_traced = traced     # (what the Tape asks which fields it wrote)
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


def data_oriented(cls):
    """`@ti.data_oriented`: a class whose methods may be kernels and funcs. Nothing to do in
    tinyad: kernels and funcs bind `self` themselves (Kernel.__get__, Func.__get__)."""
    return cls


class AdjointKernel:
    """`kernel.grad`: the reverse-mode adjoint of a kernel, built from its IR on first use."""

    def __init__(self, primal: Kernel):
        self.autodiff_mode = AutodiffMode.REVERSE
        self.primal = primal

    def __call__(self, *args, **kwargs):
        try:           # (as Kernel.__call__)
            return self._launch(args, kwargs)
        except BaseException as exc:
            _surface(exc)
            raise

    def replay(self, args, kwargs, launch):
        """The Tape's call: the adjoint of one recorded launch, whose checker record (None:
        unchecked) holds the trace and arguments it ran with (no binding or lookup again)."""
        try:           # (as Kernel.__call__)
            if launch is not None:
                if not self.primal.is_no_grad:
                    launch.compiled.run_adjoint(launch.scalars, launch, False)
                return None
            return self._launch(args, kwargs, launch, manual=False)
        except BaseException as exc:
            _surface(exc)
            raise

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


class VariantView:
    """A variant of a kernel that `.ir` shows, built on first use by `derive(traced kernel)`:
    `kernel.fwd`, the forward-mode (tangent) one that launches inside ti.ad.FwdMode run;
    `kernel.checked`, the one the rule checker runs where the IR leaves a launch's accesses
    open (tinyad/check/accessrecord.py `checked_ir`)."""

    def __init__(self, primal: Kernel, derive, autodiff_mode: AutodiffMode):
        self.autodiff_mode = autodiff_mode
        self.primal = primal
        self.derive = derive

    @property
    def ir(self) -> ir.Kernel:
        traced = self.primal._traced_for_inspection()
        return _user_facing(lambda: self.derive(traced))


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


class Memos(dict):
    """What other modules work out about one traced kernel, once: `traced.memos[build]` is
    `build(traced)`, made on first use and kept (a plain dict lookup after that: some are
    asked for several times per launch). The builders, each a module-level function or
    class: the rule checker's facts (tinyad/check/facts.py), rows (check/rows.py), write
    events and derivations (check/forward.py), race flows (check/races.py), the fields its
    NaN check looks at (check/nonfinite.py), its regions (tinyad/check/regions.py), adjoint
    bounds (tinyad/checkedlaunch.py) and checked variant (check/accessrecord.py)."""

    __slots__ = ("traced",)

    def __init__(self, traced):
        super().__init__()
        self.traced = traced

    def __missing__(self, build):
        made = self[build] = build(self.traced)
        return made


class TracedKernel:
    """One traced kernel: its IR, the variants derived from it, a program per variant from the
    backend of this ti.init (tinyad/backend.py), and what other modules work out about it once
    (`memos`)."""

    # How each variant's IR is derived from the primal IR, on first use. A new kind of
    # derivative is one more entry here.
    DERIVED = {"adjoint": _adjoint_ir, "tangent": _tangent_ir,
               "adjoint_tangent": _adjoint_tangent_ir}
    trusted = False       # its kernel is ti.ad.trust'ed (Kernel.trust)

    def __init__(self, kernel_ir: ir.Kernel, params: dict | None = None):
        self.ir = kernel_ir
        self.params = params or {}   # ndarray parameter name -> its ArrayParam in the IR
        self._bindings: dict = {}    # ids of the arrays bound -> BoundTracedKernel (latest last)
        self._variants = {"primal": kernel_ir}
        self._programs = {}
        self._written = {}     # variant -> the fields it writes (what a failed launch restores)
        self.memos = Memos(self)   # what other modules work out about this kernel, once
        self.notes = []        # (loc, op) where reverse mode cuts a gradient path
        self.dropped_tangents = []   # (field, loc): stores that lose a tangent (no .dual)
        self.dropped_adjoint_tangents = []   # the same, in the adjoint's tangent

    def variant_ir(self, variant: str) -> ir.Kernel:
        if variant not in self._variants:
            self._variants[variant] = self.DERIVED[variant](self)
        return self._variants[variant]

    def adjoint_ir(self) -> ir.Kernel:
        return self.variant_ir("adjoint")

    def program(self, variant: str, backend):
        """`backend`'s program for a variant, prepared on first use (a trace lives for one
        ti.init, and so runs on one backend)."""
        if variant not in self._programs:
            kernel_ir = self.variant_ir(variant)
            if backend.config.print_ir:     # ti.init(print_ir=True), as Taichi's prints its own
                print(compact_ir(format_kernel(kernel_ir)), end="\n\n")   # (`# line` comments)
            if variant == "adjoint":
                backend.backward_starts(self)
            self._programs[variant] = backend.prepare(kernel_ir)
        return self._programs[variant]

    def has_program(self, variant: str) -> bool:
        return variant in self._programs

    def program_ir(self, variant: str) -> ir.Kernel:
        """The IR the backend's program for `variant` is made from."""
        return self.variant_ir(variant)

    def bound_to(self, arrays: dict, shares_programs: bool) -> BoundTracedKernel:
        """This trace bound to the ndarray arguments of a launch (kept for the latest few sets
        of arrays, so a Tape's replay finds the launch's own). `shares_programs`: the
        backend's programs take the arrays at each launch (Backend.arrays_as_parameters)."""
        key = tuple(id(arrays[name]) for name in self.params)   # an array's grad is its own
        bound = self._bindings.get(key)
        if bound is None:
            bound = self._bindings[key] = BoundTracedKernel(self, bind(self.params, arrays),
                                                            shares_programs)
            while len(self._bindings) > MAX_BINDINGS:
                del self._bindings[next(iter(self._bindings))]   # the oldest made
        return bound

    def _warn_non_differentiable(self):
        """Once per kernel, when its gradient first runs: where gradient paths are cut (once
        per line, however many times a ti.func on it was inlined)."""
        if not self.notes:        # (asked at every adjoint launch)
            return
        for (file, line, op) in dict.fromkeys((loc.file, loc.line, op) for loc, op in self.notes):
            warnings.warn_explicit(
                f"`{op}` has no derivative: no gradient flows back through it (a note, not an "
                "error; use ti.stop_grad(...) to say this is intended)",
                NonDifferentiableWarning, file, line)
        self.notes = []

    def launch(self, variant: str, scalars, *rest):
        """Launch a variant on this ti.init's backend with the checks around it
        (tinyad/launch.py), undoably (tinyad/undo.py: a launch or Tape that fails part way
        leaves the fields as they were); -> (the kernel's return value, the checker's record
        of the launch or None). `rest`: an adjoint's (record, manual), launch.run's."""
        recording = active_capture.get()
        if recording is not None:     # (tinyad/capture.py)
            recording.launch(self, variant, scalars)
        backend = runtime.backend
        tape_log = undo.active_undo.get()
        if tape_log is None and not backend.launches_can_fail:
            return run_launch(backend, self, variant, scalars, *rest)    # nothing to undo
        written = self._written.get(variant)
        if written is None:
            written = self._written[variant] = ir.fields_written(self.variant_ir(variant).body)
        return undo.run_undoable(written, tape_log,
                                 lambda: run_launch(backend, self, variant, scalars, *rest))

    def run_tangent(self, scalars):
        """Run the tangent kernel (forward mode); -> (its return value, None)."""
        if not self.has_program("tangent"):    # (prepared, and printed, before the warnings)
            self.program("tangent", runtime.backend)
        self._warn_non_differentiable()
        return self.launch("tangent", scalars)

    def run_adjoint(self, scalars, record=None, manual=True):
        """Run the adjoint kernel for a primal launch (found by its arguments if not given);
        inside ti.ad.FwdMode its tangent variant (forward over reverse)."""
        variant = "adjoint_tangent" if active_forward_mode.get() is not None else "adjoint"
        if not self.has_program(variant):      # (prepared, and printed, before the warnings)
            self.program(variant, runtime.backend)
        self._warn_non_differentiable()
        if variant == "adjoint_tangent":
            self.launch(variant, scalars)
            return
        self.launch("adjoint", scalars, record, manual)


MAX_BINDINGS = 16   # sets of ndarray arguments one trace keeps its bound variants for


class BoundTracedKernel(TracedKernel):
    """A trace with ndarray parameters bound to the arrays of a launch. Its IR variants are the
    trace's with each ArrayParam replaced by its array (tinyad/arrayparams.py): interp mode
    runs them, and the rule checkers reason about them, keyed on the arrays. A backend whose
    programs take the arrays at each launch (`arrays_as_parameters`, fast mode) runs the
    trace's own program, compiled once per dtype and shape, with the ArrayParams pointed at
    this launch's arrays."""

    def __init__(self, generic: TracedKernel, mapping: dict, shares_programs: bool):
        self.generic, self.mapping, self._bound_nodes = generic, mapping, {}
        self.shares_programs = shares_programs
        self.ir = bind_arrays(generic.ir, mapping, self._bound_nodes)
        self.params = {}
        self._variants = {"primal": self.ir}
        self._programs = {}
        self._written = {}
        self.memos = Memos(self)   # its own: the checkers reason about the bound arrays

    def variant_ir(self, variant: str) -> ir.Kernel:
        if variant not in self._variants:
            self._variants[variant] = bind_arrays(self.generic.variant_ir(variant), self.mapping,
                                                  self._bound_nodes)
        return self._variants[variant]

    @property
    def trusted(self) -> bool:
        return self.generic.trusted

    def program(self, variant: str, backend):
        if self.shares_programs:
            set_bound(self.mapping)
            return self.generic.program(variant, backend)
        return super().program(variant, backend)

    def has_program(self, variant: str) -> bool:
        if self.shares_programs:
            return self.generic.has_program(variant)
        return super().has_program(variant)

    def program_ir(self, variant: str) -> ir.Kernel:
        if self.shares_programs:
            return self.generic.variant_ir(variant)
        return self.variant_ir(variant)

    def _warn_non_differentiable(self):
        self.generic._warn_non_differentiable()

    def _bound(self, pairs) -> list:
        return [(self.mapping.get(f, f), loc) for f, loc in pairs]

    notes = property(lambda self: self.generic.notes)
    dropped_tangents = property(lambda self: self._bound(self.generic.dropped_tangents))
    dropped_adjoint_tangents = property(
        lambda self: self._bound(self.generic.dropped_adjoint_tangents))


def _is_ndarray(kind) -> bool:
    return isinstance(kind, lang.NdarrayType)


def _check_scalar(kernel, name, value, dtype: T.DType):
    if type(value) is int or (type(value) is float and dtype.is_float):    # the common case
        return value
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
