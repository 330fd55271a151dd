"""A gradient kernel written by hand, compared with tinyad's own adjoint of the launch it undoes.

Why: users write a kernel that reads the gradient of some fields' values (`y.grad`) and adds to
the gradient of others (`x.grad`), run in place of a kernel's `.grad()` (PlasticineLab's
`svd_grad`; Warp's guide lists wrong math in such an adjoint, a wrong constant or a dropped term,
as a classic silent bug). Nothing else checks its math.

What: a launch outside a Tape's recording (and outside a grad_for function, which
tinyad/customcheck.py checks) of a kernel that loads `.grad` of fields G_out and writes `.grad`
of fields G_in, not those it loads (facts.py's grads_loaded / grads_by_hand; a kernel that only
rescales or clips a gradient in place undoes nothing), is matched to the forward launch it
undoes: the latest earlier launch outside a Tape still awaiting its adjoint that loads every
field of G_in and writes every field of G_out. That launch then counts as differentiated, as a
.grad() would make it (the manual-sweep checks then neither take its adjoint as skipped nor
hand its .grad() to the wrong launch). If its kernel is one tinyad differentiates, nothing it
loads has changed since (by a kernel or Python scope), and the launch broke no rule, then just
before the hand-written launch, tinyad's adjoint of that forward launch runs on the gradients
as they are (the forward's other outputs' gradients zero: the hand-written kernel answers only
for G_out), and what it leaves in G_in's gradients is kept; every field is put back. After the
hand-written launch, each element of G_in's gradients it changed must hold what tinyad's
adjoint left there (accumulating: `+=`), or, where the kernel assigns to that gradient
(`x.grad[i] = ...`), what tinyad's adjoint added. A mismatch beyond rounding is a
CustomGradientRuleError naming both kernels, the element and both values.

Once per hand-written kernel (the first launch that can be judged; a kernel whose launches
never can be is given up after ATTEMPTS). Silent, and said so in docs/checker.md: a forward
kernel tinyad cannot differentiate (why such kernels exist: an atomic's result replayed, a
`break` in a parallel loop), no forward launch that matches, inputs changed since, elements the
hand-written kernel left alone, a gradient it both reads and writes (x.grad[t] from
x.grad[t + 1] in one time-indexed field).
`ti.ad.trust(kernel)` opts a kernel out.

Cost: one test of two kernel facts per launch; a program without such kernels pays nothing more.
One with them pays a look at the launches awaiting their adjoint per hand-written launch.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tinyad.check.facts import kernel_facts
from tinyad.check.handgrad_words import hand_gradient_mismatch
from tinyad.core import ir
from tinyad.core.errors import TinyadError
from tinyad.core.srcloc import user_loc

ATTEMPTS = 8                        # launches of one hand-written kernel tried before giving up
RTOL = {"f64": 1e-7, "f32": 1e-4}   # relative to the element and to the field's largest change


@dataclass
class _State:
    """Per checker (one per ti.init)."""
    finished: set = field(default_factory=set)    # hand-written kernels judged or given up
    attempts: dict = field(default_factory=dict)  # hand-written kernel -> launches tried


@dataclass
class Pending:
    """One hand-written launch: the forward launch it undoes and, if it is judged, what tinyad's
    adjoint left, to compare afterwards."""
    hand: object            # the traced hand-written kernel
    launch: int             # its launch number
    forward: object         # the Launch it undoes
    before: dict = field(default_factory=dict)    # G_in grad -> its values before the launch
    expected: dict = field(default_factory=dict)  # G_in grad -> its values after tinyad's adjoint


def checked_run(launch, run, *args):
    """A forward launch of a gradient kernel written by hand (`launch`: its CheckedLaunch,
    tinyad/backend.py): `run(*args)` runs it between before_launch and after_launch; -> what
    run returns."""
    checker, storage = launch.checker, launch.backend.storage
    pending = before_launch(checker, launch.traced, launch.record.number, storage,
                            launch.adjoint_unchecked)
    result = run(*args)
    if pending is not None:
        after_launch(checker, pending, storage)
    return result


def before_launch(checker, traced, number: int, storage, run_adjoint) -> Pending | None:
    """Before a launch of `traced` (number `number`): if it is a gradient kernel written by hand
    that undoes a forward launch, -> a Pending for after_launch; if it is to be judged now,
    tinyad's adjoint of that launch has run on copies. `run_adjoint(traced, scalars)` runs a
    kernel's adjoint program unchecked; `storage` is the backend's."""
    facts = kernel_facts(traced)
    if not facts.hand_gradient:
        return None       # (every launch of every program comes here: keep this first)
    if checker.tape is not None or checker.in_custom_grad or checker.in_custom_primal:
        return None
    for fld in facts.loads_differentiable:    # (a gradient kernel is never differentiated:
        awaiting = checker.awaiting_adjoint.get(fld)      # it awaits no adjoint)
        if awaiting:
            awaiting.pop(number, None)
    targets = [g for g in facts.grads_by_hand if g not in facts.grads_loaded]
    forward = _matching_forward(checker, facts, targets)
    if forward is None:
        return None
    pending = Pending(traced, number, forward)
    state = getattr(checker, "hand_adjoints", None)
    if state is None:
        state = checker.hand_adjoints = _State()
    if traced in state.finished:
        return pending
    tried = state.attempts[traced] = state.attempts.get(traced, 0) + 1
    if tried >= ATTEMPTS or traced.trusted:
        state.finished.add(traced)
    if traced.trusted or not _judgeable(checker, forward):
        return pending
    expected = _adjoint_on_copies(forward, facts, targets, storage, run_adjoint)
    if expected is not None:
        state.finished.add(traced)
        pending.expected = expected
        pending.before = {g: storage.to_host(g).copy() for g in targets}
    return pending


def after_launch(checker, pending: Pending, storage) -> None:
    """The hand-written launch has run: the forward launch it undoes counts as differentiated,
    by a manual adjoint (a later .grad() of a launch alike finds the one before it; the sweep
    check does not take its adjoint as skipped, but may take those of the launches that wrote
    what it read), and, if judged, what it left is compared with tinyad's."""
    checker.adjoint_ran(pending.forward)
    checker.lost.sweeps.manual_adjoint_ran(pending.forward)
    stores = {id(s.field) for s in ir.walk_stmts(pending.hand.ir.body)
              if isinstance(s, ir.Store) and s.field.role == "grad"}
    for grad, expected in pending.expected.items():
        now = storage.to_host(grad).astype(np.float64)
        before = pending.before[grad].astype(np.float64)
        expected = expected.astype(np.float64)
        added = expected - before
        changed = (now != before) & np.isfinite(now) & np.isfinite(expected)
        if not changed.any():
            continue
        rtol = RTOL["f64" if grad.dtype.np == np.float64 else "f32"]
        scale = max(float(np.abs(added[changed]).max()), float(np.abs((now - before)[changed])
                                                               .max()), 1e-300)
        ok = np.isclose(now, expected, rtol=rtol, atol=rtol * scale)
        if id(grad) in stores:          # it assigns: what tinyad's adjoint added is also right
            ok |= np.isclose(now, added, rtol=rtol, atol=rtol * scale)
        wrong = changed & ~ok
        if wrong.any():
            element = tuple(int(i) for i in np.argwhere(wrong)[0])
            checker.report(_mismatch(pending, grad, element, now, before, expected,
                                     id(grad) in stores, int(wrong.sum())))
            return


def _matching_forward(checker, facts, targets):
    """The latest launch outside a Tape awaiting its adjoint that loads the primal of every
    gradient the hand-written kernel writes (and does not read: a kernel that only rescales a
    gradient in place, a clipping, undoes nothing) and writes the primal of every gradient it
    reads, or None."""
    if not targets:
        return None
    outputs = {id(g.primal) for g in facts.grads_loaded}
    inputs = {id(g.primal) for g in targets}
    awaiting = checker.awaiting_adjoint.get(targets[0].primal)
    for launch in reversed(awaiting.values()) if awaiting else ():
        other = kernel_facts(launch.compiled)
        if other.grads_loaded or other.grads_by_hand:
            continue                     # (a gradient kernel itself: no forward launch)
        if inputs <= {id(f) for f in other.loaded} and \
                outputs <= {id(f) for f in other.written}:
            return launch
    return None


def _judgeable(checker, forward) -> bool:
    """Can tinyad's adjoint of `forward` be run now as it would have run then: a kernel tinyad
    differentiates, whose launch broke no rule and whose loads all still hold what it read?"""
    if forward.problems:
        return False
    try:
        forward.compiled.adjoint_ir()
    except TinyadError:     # not differentiable (a break, an atomic's result, ti.random())
        return False
    for fld in kernel_facts(forward.compiled).loaded:
        changed = checker.primal_changed.get(fld)
        if changed is not None and changed.time > forward.time:
            return False
    return True


def _adjoint_on_copies(forward, facts, targets, storage, run_adjoint):
    """Run tinyad's adjoint of `forward` with the hand-written kernel's upstream gradients as
    they are and the forward's other outputs' gradients zero; -> {target grad: its values
    after}, or None if it raised. Every field the adjoint touches is put back."""
    adjoint = forward.compiled.adjoint_ir()
    touched = ir.fields_of(adjoint.body)
    saved = [(f, storage.snapshot(f)) for f in touched]
    upstream = {id(g.primal) for g in facts.grads_loaded} | {id(g.primal) for g in targets}
    try:
        for fld in kernel_facts(forward.compiled).written:
            if fld.has_grad and id(fld) not in upstream and fld.grad in touched:
                storage.fill(fld.grad, 0)
        run_adjoint(forward.compiled, forward.scalars)
        return {g: storage.to_host(g).copy() for g in targets}
    except Exception:   # noqa: BLE001  (run alone it fails: not this check's to judge)
        return None
    finally:
        for fld, values in saved:
            storage.restore(fld, values)


def _mismatch(pending, grad, element, now, before, expected, assigns, count):
    hand = pending.hand.ir
    forward = pending.forward
    write_loc = next((s.loc for s in ir.walk_stmts(hand.body)
                      if isinstance(s, (ir.Store, ir.AtomicOp)) and s.field is grad), hand.loc)
    forward_facts = kernel_facts(forward.compiled)
    forward_loc = next(iter(forward_facts.first_store.values()), forward.compiled.ir.loc)
    return hand_gradient_mismatch(
        kernel=hand.name, launch=pending.launch, forward=forward.kernel,
        forward_launch=forward.number, forward_loc=forward_loc, field=grad.name,
        element=element, write_loc=write_loc, value=float(now[element]),
        expected=float(expected[element]), before=float(before[element]), assigns=assigns,
        count=count, f32=grad.dtype.np != np.float64, call_loc=user_loc())
