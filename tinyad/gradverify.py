"""`ti.ad.verify` and `ti.ad.formula`: check an autodiff gradient against an independent truth.

Why two truths: sympy differentiates the exact formula the program computes (no step size, no
rounding: a disagreement is a wrong gradient), but a formula can grow too big; central finite
differences work at any size but only to a few digits, and only away from kinks.

How: `run` (a Python callable that launches the forward kernels) is called
  1. under a launch recorder, which keeps every kernel launch as (IR, scalar arguments); the
     kernels inside a `grad_replaced` function are recorded too, since the truth is about the
     program, not about its custom gradient;
  2. under a `ti.ad.Tape(loss)`, which gives the autodiff gradient in `param.grad`.
The recorded launches are then replayed by the interpreter from the starting values, never on
the user's fields: in the symbolic domain (interp/symbolic.py) with the parameters seeded as
symbols, which gives the loss as a formula that sympy differentiates and evaluates; and in the
f64 domain (interp/wide.py) with one element nudged by +-h at a time, over a sweep of steps.

Replaying recorded launches assumes `run` only launches kernels: field writes or reads made in
Python inside `run` are not replayed (a note in the report says when the replayed loss differs).
The truth is about the program as it runs: it differentiates through `no_grad` kernels too,
so a deliberate `no_grad` shows up as a mismatch. `ti.stop_grad` is honoured: the value it
wraps is a constant to sympy, as to autodiff.

`verify(..., mode="fwd")` takes the derivatives from forward mode (one FwdMode sweep per
parameter element) instead of the Tape; `forward_reverse_check` compares the two modes with each
other along one random direction.

Side effects: none on field values (every field is restored, `at=` included); the `.grad`
fields keep what the Tape computed (all gradients are cleared first, as a Tape does). Like a
Tape, each run starts with the loss set to 0.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from tinyad.core import ir
from tinyad.core.errors import (
    GradientMismatchError,
    TinyadError,
    TinyadRuntimeError,
    TinyadTypeError,
    without_internal_frames,
)
from tinyad.field import Field
from tinyad.gradreport import GradientReport, judge, tolerance
from tinyad.ndarray import state_fields
from tinyad.runtime import Recorder, active_recorder, runtime

METHODS = ("sympy", "fd", "both")
EPS_SWEEP = (1e-5, 1e-4, 1e-6, 1e-3, 1e-7, 1e-2, 1e-8)   # relative steps, most promising first
FORMULA_SYMBOLS, FORMULA_OPS = 16, 200   # the report shows the formula up to this size


@dataclass(frozen=True)
class RecordedLaunch:
    """One recorded kernel launch, ready to replay on any domain."""
    kernel_ir: ir.Kernel
    scalars: tuple
    name: str


class LaunchRecorder(Recorder):
    """Installed as the active recorder while `run` runs once: keeps every kernel launch."""
    records_primal_kernels = True   # grad_replaced functions let their kernels be recorded

    def __init__(self):
        self.launches: list[RecordedLaunch] = []

    def record(self, kernel, args, kwargs, launch=None):
        templates, scalars = kernel.bind(args, kwargs)
        self.launches.append(RecordedLaunch(kernel.ir_for(templates).ir, scalars,
                                            kernel.fn.__name__))

    replays_field_ops = True

    def record_field_op(self, operation, dst, argument):
        """dst.copy_from(src) or dst.fill(v) inside `run`: replayed as the kernel Taichi runs
        for it (tinyad/tapekernels.py)."""
        from tinyad import tapekernels  # noqa: PLC0415  (it defines kernels: on first use)
        found = tapekernels.replay(operation, dst, argument)
        if found is not None:
            self.record(found[0], found[1], {})


def record_launches(run) -> list[RecordedLaunch]:
    """Call `run()` once and return the kernel launches it made, in order."""
    _no_tape_active()
    recorder = LaunchRecorder()
    token = active_recorder.set(recorder)
    try:
        run()
    finally:
        active_recorder.reset(token)
    return recorder.launches


def _no_tape_active():
    if active_recorder.get() is not None:
        raise TinyadRuntimeError("ti.ad.verify/formula cannot run inside a Tape",
                                 hint="call it outside the `with ti.ad.Tape(...)` block")


class FieldState:
    """The values of every placed field: taken once, restored as often as needed (through
    from_numpy, so whatever watches Python-scope writes sees the restores)."""

    def __init__(self):
        self.fields = state_fields()
        self.saved = {id(f): f.data.copy() for f in self.fields}

    def values(self) -> dict:
        return {f: self.saved[id(f)] for f in self.fields}

    def restore(self, values: dict | None = None):
        for f in self.fields:
            f.from_numpy((values or {}).get(f, self.saved[id(f)]))


# ---- arguments ----------------------------------------------------------------------------------

def _check_loss(loss):
    if not isinstance(loss, Field) or loss.shape != () or loss.element_shape:
        raise TinyadTypeError("the loss must be a 0-D field, i.e. scalar",
                              hint="declare it as ti.field(ti.f64, shape=())")
    if not loss.dtype.is_float:
        raise TinyadTypeError(f"the loss {loss.name} must be a float field, not {loss.dtype}")


def _check_params(params, loss, need_grad=True, twin="grad") -> list[Field]:
    params = [params] if isinstance(params, Field) else list(params)
    if not params:
        raise TinyadTypeError("verify needs at least one parameter field")
    for p in params:
        if not isinstance(p, Field) or p.role != "primal":
            raise TinyadTypeError(f"parameters must be fields, got {p!r}")
        if not p.dtype.is_float:
            raise TinyadTypeError(f"parameter {p.name} is {p.dtype}: only float fields have "
                                  "gradients")
        if p is loss:
            raise TinyadTypeError(f"the loss {p.name} cannot also be a parameter")
        other = p.twin_field(twin)
        if need_grad and (other is None or not other.is_placed):
            raise TinyadTypeError(
                f"parameter {p.name} has no {'gradient' if twin == 'grad' else 'dual'} field",
                hint=f"declare {p.name} with needs_{twin}=True")
    return params


def _start_values(state: FieldState, loss, at) -> dict:
    """The values every run starts from: the current ones, with `at` applied and the loss 0."""
    values = state.values()
    for f, value in (at or {}).items():
        array = np.broadcast_to(np.asarray(value, dtype=np.float64), f.data.shape)
        values[f] = array.astype(f.dtype.np)
    values[loss] = np.zeros_like(values[loss])
    return values


# ---- the symbolic truth -------------------------------------------------------------------------

def _symbol_name(base: str, index: tuple) -> str:
    if not index:
        return base
    if len(index) == 1:
        return f"{base}_{index[0]}"
    return f"{base}[{','.join(str(i) for i in index)}]"


def _symbols(params) -> dict:
    """A real sympy symbol per parameter element, named after the field (`x_0`, `m[1,2]`)."""
    import sympy as sp  # noqa: PLC0415
    taken, arrays = set(), {}
    for p in params:
        base = p.name.replace(".", "_")
        k = 2
        while base in taken:
            base, k = f"{p.name}{k}", k + 1
        taken.add(base)
        array = np.empty(p.data.shape, dtype=object)
        for index in np.ndindex(p.data.shape):
            array[index] = sp.Symbol(_symbol_name(base, index), real=True)
        arrays[p] = array
    return arrays


class SymbolicRun:
    """The recorded launches replayed with `params` as symbols: `loss` is the formula."""

    def __init__(self, launches, loss, params, values, max_symbols=256, timeout=20.0,
                 max_ops=200_000):
        from tinyad.interp import Program  # noqa: PLC0415
        from tinyad.interp.symbolic import SymbolicDomain, SymbolicMemory, as_number  # noqa: PLC0415
        from tinyad.interp.symparts import Budget, SymbolicBudgetExceeded, limits  # noqa: PLC0415
        count = sum(p.data.size for p in params)
        if count > max_symbols:
            raise SymbolicBudgetExceeded(f"{count} parameter elements would need {count} "
                                         f"symbols, more than max_symbols={max_symbols}")
        self.arrays = _symbols(params)
        self.values = values
        self.budget = Budget(max_ops, timeout)
        self.limits = lambda: limits(self.budget.deadline - time.perf_counter())
        self.domain = SymbolicDomain(self.budget)
        memory = SymbolicMemory(seeds=self.arrays, values=values)
        programs: dict = {}
        with self.limits():
            for launch in launches:
                key = id(launch.kernel_ir)
                if key not in programs:
                    programs[key] = Program(launch.kernel_ir, self.domain)
                programs[key].run(launch.scalars, runtime.rng, memory=memory)
            self.loss = as_number(memory.value(loss))

    def gradients(self) -> tuple[float, dict]:
        """(loss value, {(param, index): d loss / d element}) at the starting point, in f64.
        The stop_grad stand-ins get the values of the expressions they stand for."""
        import sympy as sp  # noqa: PLC0415

        from tinyad.interp.symeval import evaluate  # noqa: PLC0415
        point, memo, grads = {}, {}, {}
        for p, array in self.arrays.items():
            for index in np.ndindex(array.shape):
                point[array[index]] = np.float64(self.values[p][index])
        with self.limits():
            for symbol, expr in self.domain.stopped:
                point[symbol] = np.float64(evaluate(expr, point, memo))
            for p, array in self.arrays.items():
                for index in np.ndindex(array.shape):
                    derivative = sp.diff(self.loss, array[index])
                    grads[(p, index)] = evaluate(derivative, point, memo)
            return evaluate(self.loss, point, memo), grads

    def formula(self):
        """The loss in plain sympy, each stop_grad stand-in shown as `stop_grad(expression)`."""
        from tinyad.interp.symparts import standard, stop_grad  # noqa: PLC0415
        shown: dict = {}
        for symbol, expr in self.domain.stopped:
            shown[symbol] = stop_grad(expr.xreplace(shown))
        return standard(self.loss.xreplace(shown) if shown else self.loss)


# ---- the finite-difference truth ----------------------------------------------------------------

class Replayer:
    """The recorded launches replayed in f64 on private memory (interp/wide.py)."""

    def __init__(self, launches, loss, values, domain=None):
        """`domain`: the interpreter's value domain (default F64Domain: every float widened;
        an f64 program may pass NUMERIC, whose parallel loops run as numpy lanes)."""
        from tinyad.interp import Program  # noqa: PLC0415
        from tinyad.interp.wide import F64Domain  # noqa: PLC0415
        domain = domain or F64Domain()
        compiled: dict = {}
        self.steps = []
        for launch in launches:
            if id(launch.kernel_ir) not in compiled:
                compiled[id(launch.kernel_ir)] = Program(launch.kernel_ir, domain)
            self.steps.append((compiled[id(launch.kernel_ir)], launch.scalars))
        self.loss, self.values = loss, values

    def run(self, shift: dict | None = None, memory=None):
        """Replay from the starting values plus `shift` ({field: f64 array added to it}) on
        `memory` (a fresh ShadowMemory of those values by default); -> the memory."""
        from tinyad.interp.wide import ShadowMemory  # noqa: PLC0415
        values = self.values
        if shift:
            values = {**values, **{f: values[f].astype(np.float64) + delta
                                   for f, delta in shift.items()}}
        memory = memory(values) if memory is not None else ShadowMemory(values)
        for program, scalars in self.steps:
            program.run(scalars, runtime.rng, memory=memory, echo=False)
        return memory

    def loss_at(self, field=None, index=(), delta=0.0) -> float:
        shift = None
        if field is not None:
            shift = {field: np.zeros(self.values[field].shape)}
            shift[field][index] = delta
        return float(self.run(shift).array(self.loss)[()])

    def derivative(self, field, index, close_enough) -> float:
        """Central differences over EPS_SWEEP; stops at the first step that `close_enough`
        accepts, else returns the one that came closest (Taichi's GradChecker sweeps too)."""
        x = float(self.values[field][index])
        return central_difference(lambda h: self.loss_at(field, index, h), max(1.0, abs(x)),
                                  close_enough)


def central_difference(f, scale: float, close_enough) -> float:
    """(f(h) - f(-h)) / 2h for h = eps * scale over EPS_SWEEP: the first quotient that
    `close_enough` accepts (a distance <= 1), else the one that came closest."""
    best, best_gap = math.nan, math.inf
    for eps in EPS_SWEEP:
        h = eps * scale
        fd = (f(h) - f(-h)) / (2 * h)
        gap = close_enough(fd)
        if gap <= 1.0:
            return fd
        if gap < best_gap or math.isnan(best):
            best, best_gap = fd, gap
    return best


# ---- verify / formula ---------------------------------------------------------------------------

def _user_facing(fn):
    """tinyad's errors surface at the user's call, without tinyad's frames (as kernels do)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TinyadError as exc:
            raise without_internal_frames(exc) from None
    return call


@_user_facing
def verify(run, loss, params, method: str = "sympy", at=None, *, rtol=None, atol=None,
           fallback: bool = False, max_symbols: int = 256, timeout: float = 20.0,
           raise_on_mismatch: bool = True, mode: str = "rev") -> GradientReport:
    """Compare the autodiff gradient of `loss` w.r.t. each field of `params` with the truth.

    `run()` launches the forward kernels. `method`: "sympy" (exact derivative of the program's
    formula), "fd" (central finite differences in f64) or "both". `at`: {field: values} to check
    at instead of the current values. A formula too large for sympy (more than `max_symbols`
    parameter elements, or past `timeout` seconds) falls back to finite differences with
    method="both" or fallback=True, else raises. Returns a GradientReport; raises
    ti.GradientMismatchError on a mismatch unless raise_on_mismatch=False. `mode="fwd"` checks
    forward mode instead of reverse mode: the derivatives come from the duals of one FwdMode
    sweep per parameter element (the params and the loss need needs_dual).
    """
    if method not in METHODS:
        raise TinyadTypeError(f"verify: method must be one of {METHODS}, got {method!r}")
    if mode not in ("rev", "fwd"):
        raise TinyadTypeError(f"verify: mode must be 'rev' or 'fwd', got {mode!r}")
    _check_loss(loss)
    params = _check_params(params, loss, twin="dual" if mode == "fwd" else "grad")
    if mode == "fwd" and not loss.has_dual:
        raise TinyadTypeError(f"the loss {loss.name} has no dual field",
                              hint=f"declare {loss.name} with needs_dual=True")
    _no_tape_active()
    state = FieldState()
    try:
        start = _start_values(state, loss, at)
        state.restore(start)
        launches = record_launches(run)
        run_loss = float(loss.data[()])
        state.restore(start)
        autodiff = (_forward_mode_gradients if mode == "fwd" else _reverse_mode_gradients)(
            run, loss, params, state, start)
        state.restore(start)
        return _compare(launches, loss, params, method, start, autodiff, run_loss,
                        rtol, atol, fallback, max_symbols, timeout, raise_on_mismatch)
    finally:
        state.restore()


def _reverse_mode_gradients(run, loss, params, state, start) -> dict:
    from tinyad.ad import Tape  # noqa: PLC0415  (ad.py imports this module lazily)
    from tinyad.customcheck import standing_aside  # noqa: PLC0415
    with standing_aside(), Tape(loss):   # (the whole gradient is checked here)
        run()
    return {p: p.grad.data.astype(np.float64) for p in params}


def _forward_mode_gradients(run, loss, params, state, start) -> dict:
    """One FwdMode sweep per parameter element, seeded with that element alone."""
    from tinyad.ad import FwdMode  # noqa: PLC0415
    gradients = {}
    for p in params:
        values = np.zeros(p.data.shape)
        for k, index in enumerate(np.ndindex(values.shape)):
            state.restore(start)
            seed = np.zeros(values.size)
            seed[k] = 1.0
            with FwdMode(loss=loss, param=p, seed=seed.tolist()):
                run()
            values[index] = float(loss.dual.data[()])
        gradients[p] = values
    return gradients


def _compare(launches, loss, params, method, start, autodiff, run_loss, rtol, atol, fallback,
             max_symbols, timeout, raise_on_mismatch) -> GradientReport:
    precision = _precision(launches, loss, params)
    report = GradientReport(loss.name, [p.name for p in params], method, [], [])
    truths, loss_values = {}, []
    if method in ("sympy", "both"):
        found = _sympy_truth(report, launches, loss, params, start, max_symbols, timeout,
                             give_up=method == "sympy" and not fallback)
        if found is not None:
            loss_values.append(found[0])
            truths["sympy"] = found[1]
    if method in ("fd", "both") or not truths:
        replayer = Replayer(launches, loss, start)
        loss_values.append(replayer.loss_at())
        tol = tolerance(rtol, atol, "fd", precision, autodiff)
        truths["fd"] = {(p, i): replayer.derivative(p, i, _closeness(autodiff[p][i], tol))
                        for p in params for i in np.ndindex(p.data.shape)}
    report.truths = list(truths)
    report.loss_value = loss_values[0]
    judge(report, params, autodiff, truths, rtol, atol, precision)
    if any(not math.isclose(v, run_loss, rel_tol=1e-3 if precision == "f32" else 1e-8,
                            abs_tol=1e-12) for v in loss_values):
        report.notes.append(f"the replayed loss {loss_values[0]:.10g} differs from the loss the "
                            f"run computed ({run_loss:.10g}): does `run` change fields from "
                            "Python, or choose kernels by field values?")
    if not report.ok and raise_on_mismatch:
        raise GradientMismatchError(
            report.render(), report,
            hint="a wrong custom gradient (grad_replaced/grad_for), or a kernel that breaks a "
                 "global data access rule (check with ti.init(check='error')), gives this")
    return report


def _sympy_truth(report, launches, loss, params, start, max_symbols, timeout, give_up):
    """(loss value, gradients) from sympy; None (with a note) when sympy cannot do it and
    finite differences may stand in, else the reason is raised."""
    from tinyad.interp.symparts import SymbolicBudgetExceeded, SymbolicUnsupported  # noqa: PLC0415
    try:
        symbolic = SymbolicRun(launches, loss, params, start, max_symbols, timeout)
        value, grads = symbolic.gradients()
    except (SymbolicBudgetExceeded, SymbolicUnsupported) as exc:
        if give_up:
            raise type(exc)(f"sympy cannot verify this gradient: {exc.message}", exc.loc,
                            hint="pass fallback=True or method='both' to use finite "
                                 "differences instead") from None
        report.notes.append(f"sympy gave up ({exc.message}); finite differences used")
        return None
    if sum(p.data.size for p in params) <= FORMULA_SYMBOLS and \
            symbolic.budget.ops <= 20 * FORMULA_OPS:
        shown = symbolic.formula()
        if shown.count_ops() <= FORMULA_OPS:
            report.formula = shown
    return value, grads


def _closeness(ad, tol):
    """How far a finite difference is from the autodiff value, in tolerances (<= 1: close)."""
    def distance(fd):
        if fd == ad:
            return 0.0
        return abs(fd - ad) / tol(fd) if tol(fd) > 0 else math.inf
    return distance


def _precision(launches, loss, params) -> str:
    """"f32" when any value of the program is f32 (then autodiff rounds like f32 too)."""
    f32 = [f for f in (loss, *params) if f.dtype.is_float and f.dtype.np is np.float32]
    for launch in launches:
        if f32:
            break
        for stmt in ir.walk_stmts(launch.kernel_ir.body):
            if any(sub.dtype.is_float and sub.dtype.np is np.float32
                   for expr in ir.stmt_exprs(stmt) for sub in ir.walk_expr(expr)):
                f32.append(stmt)
                break
    return "f32" if f32 else "f64"


@_user_facing
def formula(run, loss, params=None, simplify: bool = False, max_symbols: int = 256,
            timeout: float = 20.0):
    """The loss that `run()` computes, as a sympy expression in the elements of `params`
    (default: the float fields with needs_grad that the launched kernels use). The loss starts
    at 0, as under a Tape; field values are restored afterwards."""
    _check_loss(loss)
    _no_tape_active()
    state = FieldState()
    try:
        start = _start_values(state, loss, None)
        state.restore(start)
        launches = record_launches(run)
    finally:
        state.restore()
    if params is None:
        used = {id(f): f for launch in launches for f in ir.fields_of(launch.kernel_ir.body)}
        params = [f for f in used.values() if f.role == "primal" and f is not loss and
                  f.dtype.is_float and f.has_grad]
    params = _check_params(params, loss, need_grad=False)
    expr = SymbolicRun(launches, loss, params, start, max_symbols, timeout).formula()
    if simplify:
        import sympy as sp  # noqa: PLC0415
        expr = sp.simplify(expr)
    return expr


@_user_facing
def forward_reverse_check(run, loss, params, seed: int = 0, rtol: float | None = None) -> dict:
    """The forward/reverse consistency ("dot-product") test: for a random direction v over the
    elements of `params`, forward mode's directional derivative d(loss)/d(params) . v (one
    FwdMode sweep, a JVP) must equal reverse mode's gradient . v (one Tape, a VJP): for a
    scalar loss <u, J v> == <J^T u, v> with u = 1. It needs no truth and catches a bug in either
    mode (a forward mode whose plain stores accumulate tangents, say), but not one both modes
    share (ti.ad.verify catches those). Params need needs_grad and needs_dual; the loss too.
    -> {"jvp": ..., "vjp": ...}; raises ti.GradientMismatchError when they disagree."""
    from tinyad.ad import FwdMode, Tape  # noqa: PLC0415  (ad.py imports this module lazily)
    from tinyad.customcheck import standing_aside  # noqa: PLC0415
    _check_loss(loss)
    params = _check_params(params, loss)
    _check_params(params, loss, twin="dual")
    if not loss.has_dual:
        raise TinyadTypeError(f"the loss {loss.name} has no dual field",
                              hint=f"declare {loss.name} with needs_dual=True")
    _no_tape_active()
    rng = np.random.default_rng(seed)
    directions = {p: rng.uniform(-1, 1, p.data.shape) for p in params}
    state = FieldState()
    try:
        start = _start_values(state, loss, None)
        state.restore(start)
        with standing_aside(), Tape(loss):   # (the gradient as a whole is checked here)
            run()
        vjp = sum(float(np.sum(p.grad.data.astype(np.float64) * directions[p])) for p in params)
        state.restore(start)
        first = params[0]
        with FwdMode(loss=loss, param=first, seed=directions[first].ravel().tolist()):
            for p in params[1:]:
                p.dual.from_numpy(directions[p].astype(p.dtype.np))
            run()
        jvp = float(loss.dual.data[()])
        precision = _precision([], loss, params)
    finally:
        state.restore()
    rtol = rtol if rtol is not None else (1e-4 if precision == "f32" else 1e-9)
    if not math.isclose(jvp, vjp, rel_tol=rtol, abs_tol=rtol * 1e-3):
        raise GradientMismatchError(
            f"forward and reverse mode disagree on {loss.name}: along a random direction v, "
            f"forward mode's d{loss.name}.v = {jvp:.10g} but reverse mode's grad.v = {vjp:.10g}",
            None, hint="one of the two modes is wrong here: ti.ad.verify(run, loss, params, "
                       "mode='fwd') and mode='rev' tell which")
    return {"jvp": jvp, "vjp": vjp}
