"""Custom gradients checked automatically: each `grad_replaced` / `grad_for` pair, once per call
site, by the dot-product test against finite differences of its primal.

Why: a custom gradient replaces autodiff for its piece of the program, and nothing else checks
that it is the derivative of what its primal computes (a wrong constant, a dropped term, a
checkpointing segment that chains only some adjoints). `ti.ad.verify` would, but only where the
user thinks of calling it. The final gradient of a wrong one is silently wrong; this names the
piece.

The test, for the primal P seen as a map from the elements it reads to the elements it writes:
for a random direction v on the inputs and random weights w on the outputs,
    w . (J v)    by central differences of P, replayed in f64 (tinyad/gradverify.py's Replayer),
    v . (J^T w)  by the custom gradient, run with w as the outputs' .grad and every other
                 gradient zero,
must agree (one w, two directions v): within 1e-5 of the dot product's terms in an f64
program (its replays run as numpy lanes), within 1e-3 in an f32 one (the custom gradient
rounds like f32; its replays widen every value to f64 on the interpreter's scalar path, for up
to SCALAR_LIMIT elements). Which elements count, from one replay of P that notes
every access (`_AccessSets`):
  * inputs: float elements with a gradient that P reads before writing them;
  * outputs: elements P writes and does not read again. An element P writes and then reads is
    its scratch (a checkpointed step's temporaries): its gradient after P is nobody's, and a
    custom gradient may clear it, so it gets no weight. An element P reads, then overwrites in
    place is an output but no input (whether its gradient is zeroed or kept is convention).

When: under a Tape with the rule checks on (ti.init's check, "error" by default, or "warn"), at
the first call of each pair from each source line (a loop over time steps pays once). The
primal's launches are recorded as it runs (its fields untouched); the test runs when the Tape
reaches that call's custom gradient (for a loop, the last one the backward pass runs), just
before the real call, on copies: every field value and gradient is put back, the rule checker
is paused. A mismatch is reported after the real call, so a rule the checker finds on the way
(which names the exact line) comes first. Not checked: a pair called by hand outside a Tape
(`f(); f.grad()`), and elements a primal reads and then overwrites in place. The check stands
aside where it cannot judge: ti.random() in the primal, a replay that does not reproduce what
the primal computed (Python-scope writes inside it), no input or output with a gradient, a
custom gradient that raises when run alone. It stands aside inside `ti.ad.verify`,
`ti.ad.forward_reverse_check` and a `Tape(loss, grad_check=[...])`, which check the whole
gradient themselves.

Off: `@ti.ad.grad_for(primal, check=False)` for one pair; ti.init(check="off") for all checks.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import linecache
import time

import numpy as np

from tinyad.backend import NO_CHECKS
from tinyad.check import rules
from tinyad.check.report import Access
from tinyad.core import ir
from tinyad.core.errors import TinyadError
from tinyad.core.srcloc import SrcLoc, user_loc
from tinyad.interp import lanes
from tinyad.interp.domain import NUMERIC
from tinyad.interp.wide import ShadowMemory
from tinyad.ndarray import state_fields
from tinyad.notices import note
from tinyad.runtime import active_forward_mode, active_recorder, runtime
from tinyad.undo import active_undo

DIRECTIONS = 2
# An f32 program's replays widen every value to f64 on the interpreter's scalar path (~20 us an
# element and statement): past this many elements in the fields its primal uses, not checked.
SCALAR_LIMIT = 20_000
RTOL = {"f64": 1e-5, "f32": 1e-3}   # f32: the custom gradient itself rounds like f32
_checked_sites: dict = {}            # ti.init generation -> {(primal, file, line)}
_standing_aside: contextvars.ContextVar = contextvars.ContextVar("tinyad_custom_check_aside",
                                                                 default=False)
# custom gradients tested so far (tests count them), and the seconds the check took in all
stats = {"checked": 0, "seconds": 0.0}


def _timed(method):
    """Adds the method's time to stats["seconds"] (what the check costs, measured)."""
    @functools.wraps(method)
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            stats["seconds"] += time.perf_counter() - start
    return timed


@contextlib.contextmanager
def standing_aside():
    """No custom gradient is checked inside (ti.ad.verify checks the whole gradient)."""
    token = _standing_aside.set(True)
    try:
        yield
    finally:
        _standing_aside.reset(token)


def probe_for(primal) -> Probe | None:
    """A Probe for this call of a grad_replaced `primal` under a Tape, or None: checks off,
    the pair opted out, or this call site already checked (a loop's first call is the one)."""
    if runtime.backend.checks is NO_CHECKS or _standing_aside.get() or \
            not getattr(primal, "check_gradient", False) or \
            active_forward_mode.get() is not None or \
            getattr(active_recorder.get(), "grad_check", None):   # (Tape(grad_check=) checks)
        return None
    loc = user_loc()
    if loc is None:
        return None
    sites = _checked_sites.setdefault(runtime.generation, set())
    if len(_checked_sites) > 1:          # (an earlier ti.init's sites are gone for good)
        for generation in [g for g in _checked_sites if g != runtime.generation]:
            del _checked_sites[generation]
    key = (id(primal), loc.file, loc.line)
    if key in sites:
        return None
    sites.add(key)
    return Probe(primal, loc)


class _AccessSets(ShadowMemory):
    """A ShadowMemory that notes, per float field, the elements read before any write, the
    elements written, and the elements read after a write (as flat masks)."""

    def __init__(self, values=None):
        super().__init__(values)
        self.read_first: dict = {}
        self.written: dict = {}
        self.read_after_write: dict = {}

    def mask(self, table: dict, field) -> np.ndarray:
        """Field's flat mask in `table`; the sets map id(field) -> (field, mask)."""
        entry = table.get(id(field))
        if entry is None:
            entry = table[id(field)] = (field, np.zeros(self.array(field).size, bool))
        return entry[1]

    def note_reads(self, field, flat) -> None:
        if field.dtype.is_float:
            written = self.written.get(id(field))
            after = written[1][flat] if written is not None else np.zeros(np.shape(flat), bool)
            self.mask(self.read_after_write, field)[np.asarray(flat)[after]] = True
            self.mask(self.read_first, field)[np.asarray(flat)[~after]] = True

    def note_writes(self, field, flat) -> None:
        if field.dtype.is_float:
            self.mask(self.written, field)[flat] = True

    def _flat(self, field, index) -> np.ndarray:
        shape = self.array(field).shape
        return np.array([np.ravel_multi_index(index, shape) if index else 0])

    def load(self, field, index, site):
        value = super().load(field, index, site)
        self.note_reads(field, self._flat(field, index))
        return value

    def store(self, field, index, value, site):
        super().store(field, index, value, site)
        self.note_writes(field, self._flat(field, index))

    def atomic(self, op, field, index, value, site):
        old = super().atomic(op, field, index, value, site)
        self.note_writes(field, self._flat(field, index))
        return old


class _TrackedLanes(lanes.PlainLanes):
    """The lane form of _AccessSets: a parallel loop's accesses noted as index arrays."""

    def load(self, fld, idx, lanes_, site):
        data, where, flat = self.locate(fld, idx, len(lanes_), site)
        self.memory.note_reads(fld, flat)
        return data[where]

    def store(self, fld, idx, values, lanes_, site):
        super().store(fld, idx, values, lanes_, site)
        self.memory.note_writes(fld, self.locate(fld, idx, len(lanes_), site)[2])

    def atomic(self, op, fld, idx, values, lanes_, site):
        super().atomic(op, fld, idx, values, lanes_, site)
        self.memory.note_writes(fld, self.locate(fld, idx, len(lanes_), site)[2])


class _LaneShadow(ShadowMemory):
    """A ShadowMemory whose parallel loops run as numpy lanes (f64 programs: the lanes compute
    in the nodes' own f64, as the scalar path's F64Domain would)."""


lanes.LANE_MEMORIES[_AccessSets] = _TrackedLanes
lanes.LANE_MEMORIES[_LaneShadow] = lanes.PlainLanes


def _has_gradient(field) -> bool:
    return getattr(field, "role", None) == "primal" and field.has_grad and field.grad.is_placed


class Probe:
    """One call of a grad_replaced function, recorded for the dot-product test."""

    @_timed
    def __init__(self, primal, loc: SrcLoc):
        from tinyad.gradverify import LaunchRecorder  # noqa: PLC0415  (it imports ad.py's peers)
        self.primal, self.loc = primal, loc
        self.recorder = LaunchRecorder()     # the kernels of the primal, as it runs
        self.start = {f: f.data.copy() for f in state_fields() if getattr(f, "role", "") ==
                      "primal"}
        self.inputs: dict = {}     # field -> bool mask of the elements that are inputs
        self.outputs: dict = {}    # field -> bool mask of the elements that are outputs
        self.replayer = None
        self.base: dict = {}       # output field -> its replayed values after the primal

    @_timed
    def primal_ran(self) -> bool:
        """The primal has run (its launches recorded): find its inputs and outputs by one
        replay. -> whether the test can judge this call (then the Tape calls `gradient`)."""
        try:
            self._find_inputs_and_outputs()
        except TinyadError:          # (something the f64 replay cannot run: not judged)
            self.replayer = None
        self.start = None if self.replayer is None else self.start
        return self.replayer is not None

    def _find_inputs_and_outputs(self) -> None:
        """Inputs and outputs from one replay that notes each access; the replayer is kept
        only if that replay reproduces what the primal computed."""
        from tinyad.gradverify import Replayer, _precision  # noqa: PLC0415
        launches = self.recorder.launches
        if not launches or any(isinstance(x, ir.Op) and x.op == "random"
                               for launch in launches for s in ir.walk_stmts(launch.kernel_ir.body)
                               for e in ir.stmt_exprs(s) for x in ir.walk_expr(e)):
            return
        used = {id(f) for launch in launches for f in ir.fields_of(launch.kernel_ir.body)}
        self.start = {f: a for f, a in self.start.items() if id(f) in used}
        if not self.start:
            return
        self.precision = _precision(launches, next(iter(self.start)), [])
        wide = self.precision == "f32"    # f32: every value widened, on the scalar path
        size = sum(a.size for a in self.start.values())
        if wide and size > SCALAR_LIMIT:
            note(f"the custom gradient of {self.primal.__name__} (called at {self.loc}) is not "
                 f"checked: its f32 fields hold {size:,} elements, past the {SCALAR_LIMIT:,} "
                 "the f64 replay checks (in an f64 program it would be)")
            return
        replayer = Replayer(launches, None, self.start, domain=None if wide else NUMERIC)
        self.memory = ShadowMemory if wide else _LaneShadow
        sets = replayer.run(memory=_AccessSets)
        for fld, read in sets.read_first.values():
            written = sets.written.get(id(fld))
            mask = (read & ~written[1] if written is not None else read).reshape(
                sets.array(fld).shape)
            if _has_gradient(fld) and mask.any():
                self.inputs[fld] = mask
        for fld, written in sets.written.values():
            again = sets.read_after_write.get(id(fld))
            mask = (written & ~again[1] if again is not None else written).reshape(
                sets.array(fld).shape)
            if _has_gradient(fld) and mask.any():
                if not _reproduced(sets.array(fld)[mask], fld.data[mask], self.precision):
                    return               # (Python-scope writes inside it, say): no judging
                self.outputs[fld] = mask
                self.base[fld] = sets.array(fld).copy()
        if self.inputs and self.outputs:
            self.replayer = replayer

    def gradient(self, grad_fn):
        """`grad_fn` as the Tape should call it: tested first, on copies, then run for real;
        a mismatch is reported after the real call."""
        @functools.wraps(grad_fn)
        def call(*args, **kwargs):
            mismatch = self.test(grad_fn, args, kwargs)
            result = grad_fn(*args, **kwargs)
            if mismatch is not None:
                checker = getattr(runtime.backend, "checker", None)
                if checker is not None:
                    checker.report(mismatch)
            return result
        return call

    @_timed
    def test(self, grad_fn, args, kwargs):
        """-> the rule error when the custom gradient fails the dot-product test, else None.
        Directions and weights are kept as values on their masks' elements."""
        if self.replayer is None:
            return None
        rng = np.random.default_rng(len(_checked_sites.get(runtime.generation, ())))
        weights = {f: rng.uniform(-1, 1, int(m.sum())) for f, m in self.outputs.items()}
        adjoint = _run_alone(grad_fn, args, kwargs, self.outputs, weights, self.inputs)
        if adjoint is None:
            return None
        stats["checked"] += 1
        # the rounding the finite differences of the weighted outputs carry
        self.rounding = 1e-9 * sum(float(np.abs(self.base[f][m] * weights[f]).sum())
                                   for f, m in self.outputs.items())
        for _ in range(DIRECTIONS):
            direction = {f: rng.uniform(-1, 1, int(m.sum())) for f, m in self.inputs.items()}
            found = self._compare(direction, weights, adjoint)
            if found is not None:
                return found
        return None

    def _compare(self, direction, weights, adjoint):
        terms = {f: direction[f] * adjoint[f] for f in direction}
        by_adjoint = float(sum(t.sum() for t in terms.values()))
        tol = self._tolerance(terms.values())
        by_fd = self._directional(direction, weights, by_adjoint, tol)
        if abs(by_fd - by_adjoint) <= tol:
            return None
        wrong = []    # where it disagrees: the same test, one input field at a time
        for f in direction:
            part, part_tol = float(terms[f].sum()), self._tolerance([terms[f]])
            if abs(self._directional({f: direction[f]}, weights, part, part_tol) - part) > \
                    part_tol:
                wrong.append(f.name)
        return rules.custom_gradient_mismatch(
            primal=self.primal.__name__, gradient=getattr(self.primal.grad, "__name__", "?"),
            call=Access(kind="call", loc=self.loc), definitions=_definitions(self.primal),
            inputs=[_describe(f, m) for f, m in self.inputs.items()],
            outputs=[_describe(f, m) for f, m in self.outputs.items()],
            by_fd=by_fd, by_adjoint=by_adjoint, wrong_inputs=wrong, precision=self.precision)

    def _tolerance(self, terms) -> float:
        """How far the two numbers may be apart: RTOL of the dot product's terms, and never
        less than the rounding of the finite differences."""
        size = sum(float(np.abs(t).sum()) for t in terms)
        return max(RTOL[self.precision] * size, self.rounding, 1e-300)

    def _directional(self, direction, weights, near: float, tol: float) -> float:
        """w . (J v) by central differences of the f64 replay (gradverify's step sweep)."""
        from tinyad.gradverify import central_difference  # noqa: PLC0415
        units = {}
        for f, values in direction.items():
            units[f] = np.zeros(self.inputs[f].shape)
            units[f][self.inputs[f]] = values

        def weighted(h):
            memory = self.replayer.run({f: h * unit for f, unit in units.items()}, self.memory)
            return float(sum((memory.array(f)[m] * weights[f]).sum()
                             for f, m in self.outputs.items()))
        scale = max([1.0] + [float(np.abs(self.start[f][self.inputs[f]]).max())
                             for f in direction])
        return central_difference(weighted, scale,
                                  lambda fd: 0.0 if fd == near else abs(fd - near) / tol)


def _reproduced(replayed, ran, precision) -> bool:
    rtol = 1e-4 if precision == "f32" else 1e-7
    return bool(np.allclose(replayed, ran.astype(np.float64), rtol=rtol, atol=rtol * 1e-3,
                            equal_nan=True))


def _run_alone(grad_fn, args, kwargs, outputs: dict, weights: dict, inputs: dict):
    """Run the custom gradient with `weights` as the gradients of the `outputs` elements and
    every other gradient zero, the rule checker paused; -> {input field: its gradient on the
    `inputs` elements}, or None if it raised. Every field value and gradient is put back."""
    backend = runtime.backend
    storage = backend.storage
    fields = [f for f in state_fields() if getattr(f, "role", "") == "primal"]
    grads = [f.grad for f in fields if _has_gradient(f)]
    saved = [(f, storage.snapshot(f)) for f in fields + grads]
    rng_state = runtime.rng.bit_generator.state
    checks, checker = backend.checks, getattr(backend, "checker", None)
    tokens = (active_recorder.set(None), active_undo.set(None))
    backend.checks, backend.checker = NO_CHECKS, None
    try:
        for g in grads:
            storage.fill(g, 0)
        for f, mask in outputs.items():
            seeded = np.zeros(mask.shape, f.grad.dtype.np)
            seeded[mask] = weights[f]
            storage.assign(f.grad, seeded)
        grad_fn(*args, **kwargs)
        return {f: storage.to_host(f.grad)[mask].astype(np.float64)
                for f, mask in inputs.items()}
    except Exception:   # noqa: BLE001  (run alone, it fails: not this check's to judge; the
        return None     # real call that follows raises whatever is the user's to see)
    finally:
        backend.checks, backend.checker = checks, checker
        active_recorder.reset(tokens[0])
        active_undo.reset(tokens[1])
        for f, values in saved:
            storage.restore(f, values)
        runtime.rng.bit_generator.state = rng_state


def _describe(field, mask) -> str:
    count = int(mask.sum())
    if count == mask.size:
        return f"{field.name} (all {count})" if count > 1 else field.name
    first = tuple(int(i) for i in np.argwhere(mask)[0])
    return f"{count} of {field.name}'s {mask.size} elements (from {field.name}{list(first)})"


def _definitions(primal) -> list:
    """The `def` lines of the primal and of its custom gradient, for the report."""
    found = []
    for label, fn in (("primal", primal), ("gradient", getattr(primal, "grad", None))):
        code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
        if code is not None:
            line = code.co_firstlineno     # (a decorator's line): on to the `def` itself
            while linecache.getline(code.co_filename, line).lstrip().startswith("@"):
                line += 1
            found.append(Access(kind=label, loc=SrcLoc(code.co_filename, line, 0, None,
                                                       code.co_name)))
    return found


__all__ = ["Probe", "probe_for", "standing_aside", "stats"]
