"""The launch checks around an adjoint launch (a Tape's, or a manual kernel.grad()), shared by
every backend that checks: before it, the problems its forward launch left, then for a manual
sweep an unseeded or out-of-order .grad(), a second .grad() of one launch, gradients taken at two
parameter values or accumulating across rounds; after it, the point its gradient was taken at.
The state they read and keep is LaunchChecker's (tinyad/check/launches.py)."""
from __future__ import annotations

import dataclasses

from tinyad.check import rules
from tinyad.check.facts import kernel_facts
from tinyad.check.launches import LaunchChecker
from tinyad.check.render import print_report
from tinyad.check.report import Access
from tinyad.check.sweeps import rows_touched
from tinyad.core.srcloc import user_loc


def before_adjoint(checker: LaunchChecker, compiled, kernel_name, launch, manual: bool) -> None:
    if launch is not None:
        for problem in launch.problems:
            checker.report(problem)      # (raises in error mode: kept for the next try)
        launch.problems = ()
    if not manual:
        return
    facts = kernel_facts(compiled)
    _check_gradient_point(checker, facts, kernel_name)
    if launch is not None:   # the specific diagnoses first: they explain an unseeded output too
        _check_order(checker, launch, facts, kernel_name)
        _check_rounds(checker, launch, facts, kernel_name)
        _check_second_adjoint(checker, launch, facts, kernel_name)
    outputs = [f for f in facts.written if f.has_grad]
    if not outputs:
        print_report(rules.no_output_gradient(kernel=kernel_name, call=user_loc()))
        return
    if not any(_seeded(f.grad, launch) for f in outputs) and not _anything_seeded(checker):
        print_report(rules.unseeded_outputs(kernel=kernel_name, call=user_loc(),
                                            outputs=[f.name for f in outputs],
                                            first_store=facts.first_store[outputs[0]]))


def _anything_seeded(checker) -> bool:
    """Does any gradient set from Python or accumulated by an adjoint hold a value? In a correct
    manual sweep, a kernel whose outputs do not reach the loss has zero output adjoints (its
    zero gradient is the true one): the seed is missing only when no gradient holds anything."""
    grads = set(checker.grad_cleared_at) | set(checker.grad_accumulated_at)
    return any(g.data is not None and g.data.any() for g in grads)


def _check_gradient_point(checker, facts, kernel_name):
    """A manual sweep that adds to a gradient still holding the gradient at other values of its
    parameter (changed since, by Python or a kernel, and not cleared)."""
    for grad in facts.adjoint_targets:
        held = checker.grad_point.get(grad)
        if held is None or checker.grad_cleared_at.get(grad, 0) > held[2]:
            continue
        values, sweep, taken = held
        primal = grad.primal
        changed = checker.primal_changed.get(primal)
        if changed is None or changed.time < taken or values is None:
            continue      # nothing wrote the parameter since: no need to compare its values
        if checker.unchanged_since(primal, values, taken) or not grad.data.any():
            continue
        checker.report(rules.gradient_at_two_points(
            kernel=kernel_name, gradient=grad.name, param=primal.name, earlier=sweep,
            change=dataclasses.replace(changed), call_loc=user_loc()))   # (a kernel's is reused)
        return


def _seeded(grad, launch) -> bool:
    """Does `grad` hold a nonzero where `launch`'s adjoint reads it? That is where the launch
    wrote its primal: the launch's plan knows boxes holding every element each of its stores may
    write (an adjoint reads a store's gradient at the store's index), so only those are looked
    at, not a time-indexed field's every step. Otherwise (no launch, or a box unknown) the whole
    field."""
    data = grad.data
    boxes = seeded_boxes(grad, launch)
    if boxes is not None:
        return any(_any(data[tuple(slice(lo, hi) for lo, hi in box)]) for box in boxes)
    return _any(data)


def seeded_boxes(grad, launch) -> set | None:
    """The boxes of `grad` that `_seeded` looks at, or None: all of it. (A checked replay
    looks at the same ones, tinyad/checkpredicates.py.)"""
    if launch is None:
        return None
    # (each box once: a scatter's stencil of atomics, 9 sites, may write the whole grid 9 times)
    boxes = {w.box for w in launch.writes if w.site is not None and w.site.field is grad.primal}
    return boxes if boxes and None not in boxes else None


def _any(values) -> bool:
    """Is any element nonzero? A seeded gradient usually is near its start (a row of mpm's
    F.grad is 128 kB), or over much of the field (its grid's, away from the walls): its first
    thousand elements, then every 64th, are looked at before all of it."""
    if values.size > 4096 and values.flags.c_contiguous:
        flat = values.reshape(-1)
        if flat[:1024].any() or flat[::64].any():
            return True
    return bool(values.any())


def _check_order(checker, launch, facts, kernel_name):
    """A manual sweep out of order: a later launch read what this one produced, its outputs
    are seeded, and its adjoint has not run yet (it would add to this one's seed later). Unless
    a kernel wrote that gradient by hand since the later launch: the user's own adjoint for it
    (PlasticineLab runs its svd_grad kernel in place of svd.grad())."""
    by_hand = checker.hand_gradient_at
    produced = {f: rows for f, rows in rows_touched(launch)[1].items() if f.has_grad}
    if not produced:
        return
    later_ones = {}      # the launches after this one, awaiting their adjoint, that load them
    for fld in produced:
        for later in checker.awaiting_after(fld, launch.time):
            later_ones[later.number] = later
    for number in sorted(later_ones):          # in launch order: the first one is reported
        later = later_ones[number]
        later_facts = kernel_facts(later.compiled)
        shared = [f for f, rows in produced.items() if rows & rows_touched(later)[0].get(f, set())
                  and by_hand.get(f.grad, 0) < later.time]
        if not shared:
            continue
        seeded = [f for f in later_facts.written if f.has_grad and _seeded(f.grad, later)]
        if seeded:
            checker.report(rules.adjoints_out_of_order(
                kernel=kernel_name, launch=launch.number, later_kernel=later.kernel,
                later_launch=later.number, field=shared[0].name))
            return


def _check_second_adjoint(checker, launch, facts, kernel_name):
    """A manual kernel.grad() for a forward launch already differentiated, with its outputs'
    gradients still seeded (a store's adjoint consumes its seed; an atomic add's does not), onto
    gradients not cleared since: they would hold its gradient twice."""
    if not launch.adjoint_runs or not any(
            f.has_grad and _seeded(f.grad, launch) for f in facts.written):
        return
    for grad in facts.adjoint_targets:
        if _said_or_cleared(checker, grad) < launch.adjoint_at and grad.data.any():
            print_report(rules.adjoint_run_twice(kernel=kernel_name, launch=launch.number,
                                                 gradient=grad.name, call_loc=user_loc()))
            checker.grad_warned_at[grad] = checker.tick()     # say it once
            return


def _check_rounds(checker, launch, facts, kernel_name):
    """A gradient this adjoint adds to still holds what an adjoint added before this round's
    forward launch (a warning: the sum may be intended). Only the gradients it adds to: one
    that the kernel reads through no derivative (floor) is not its to warn about."""
    for grad in facts.adjoint_targets:
        accumulated = checker.grad_accumulated_at.get(grad)
        if (accumulated is not None
                and _said_or_cleared(checker, grad) < accumulated < launch.origin.time
                and grad.data.any()):
            print_report(rules.gradient_accumulates_across_rounds(
                kernel=kernel_name, gradient=grad.name, call_loc=user_loc()))
            checker.grad_warned_at[grad] = checker.tick()   # say it once per round


def _said_or_cleared(checker, grad) -> int:
    """When `grad` was last cleared, or last warned about as holding an earlier sum: a warning
    is said once, but it clears nothing, so it must not hide a gradient taken at two points
    (_check_gradient_point reads only the clears)."""
    return max(checker.grad_cleared_at.get(grad, 0), checker.grad_warned_at.get(grad, 0))


def after_adjoint(checker: LaunchChecker, compiled, launch, manual: bool | None) -> None:
    """After an adjoint of `compiled` for `launch`: it ran (adjoint_ran), read the gradients
    of the fields the kernel writes and added to others, taken at the values their primals
    hold now. `manual` None: a Tape's adjoint of its own launch, one that repeats no other
    (the usual, tinyad/launch.py says), whose adjoint_ran steps are these few, inline."""
    if manual is None:
        time = checker.last_adjoint_at = checker.tick()    # (one tick for both)
        launch.adjoint_runs += 1       # (its Tape lets it go: tape_differentiated)
        launch.adjoint_at = time
    else:
        checker.adjoint_ran(launch)
        if manual:
            checker.lost.sweeps.manual_adjoint_ran(launch)
        time = checker.tick()
    written, targets = compiled.memos[_adjoint_gradients]   # (no frame: this runs per adjoint)
    read_at = checker.grad_read_at
    for grad in written:          # (the adjoint reads them)
        read_at[grad] = time
    sweep = None       # the user's line of this gradient, found once (a walk up the stack)
    for grad, primal in targets:
        checker.grad_accumulated_at[grad] = time
        held = checker.grad_point.get(grad)
        if held:            # (a tuple of three)
            changed = checker.primal_changed.get(primal)
            if changed is None or changed.time < held[2]:
                continue      # taken at these values already: once per sweep
        if sweep is None:
            # (a Tape's adjoints run from its `with` block, found once per Tape: a walk up
            # the stack per adjoint costs more than a launch of a small kernel)
            sweep = Access("gradient taken", user_loc() if manual or checker.backward_loc
                           is None else checker.backward_loc)
        _remember_gradient_point(checker, grad, sweep)


def _adjoint_gradients(compiled) -> tuple:
    """(the gradients of the primal fields `compiled` writes, which its adjoint reads;
    ((gradient, its primal), ...) of those the adjoint adds to), once per kernel (its memos),
    as kernel_facts has them."""
    facts = kernel_facts(compiled)
    return (tuple(fld.grad for fld in facts.written if fld.has_grad),
            tuple((grad, grad.primal) for grad in facts.adjoint_targets))


def _remember_gradient_point(checker: LaunchChecker, grad, sweep: Access) -> None:
    """Keep the point `sweep` took `grad` at: the values its primal holds now, copied by the
    first write of the primal after this (before_write)."""
    checker.grad_point[grad] = (None, sweep, checker.tick())
    checker.uncopied_points.setdefault(grad.primal, []).append(grad)
