"""The checks before a forward launch and before a tangent (forward-mode) launch, shared by
every backend that checks (interp and fast mode); those around an adjoint launch are in
tinyad/check/adjoints.py. Before a forward launch:
  * a field without needs_grad on the derivative path inside a Tape;
  * a field value carried into a kernel's scalar argument inside a Tape;
  * a kernel before the Tape deriving a field the taped kernels read (a warning);
  * a custom gradient's kernel reading what its forward read, changed since;
and the gradients a kernel zeroes by hand. Before a tangent launch: a field without needs_dual
on the tangent path. What they remember across launches is the checker's
(tinyad/check/launches.py `LaunchChecker`).
"""
from __future__ import annotations

from tinyad.check import beforetape, rules
from tinyad.check.facts import kernel_facts
from tinyad.check.launches import LaunchChecker
from tinyad.check.report import Access

# ---- before a forward launch ----------------------------------------------------------------

def before_forward(checker: LaunchChecker, compiled, arg_names, scalars, rows, facts) -> None:
    """`rows`, from the launch's plan: ({field: spans read}, {field: spans written}) of leading
    indices (None: every row of every field it touches).
    `facts`: the kernel's KernelFacts. A long Tape of small kernels runs this at every launch:
    what is empty for most launches is asked once, not looped over, and the kernel's name is
    looked up only for a check that uses it."""
    tape = checker.tape
    if tape is None or facts.grads_loaded or checker.lost.cut:   # (else it has nothing to do)
        checker.lost.forward_launch(facts, compiled)
    if checker.custom_running and checker.custom_running[1]:   # (None, or (name, forwards))
        checker.check_custom_reads(facts.loaded, compiled.ir.name)
    time = checker.tick()
    for fld, write in compiled.memos[_write_events]:
        write.time = time      # one Access per kernel and field, reused (see _write_events)
        checker.primal_changed[fld] = write
    if facts.grads_by_hand:     # a gradient kernel written by hand: it uses the gradients
        for grad in facts.grads_by_hand:        # it reads (gradient_consumed)
            checker.hand_gradient_at[grad] = time
        for grad in facts.grads_loaded:
            checker.grad_read_at[grad] = time
    if tape is None:
        # a grad_for function's recompute (the Tape's backward phase) is no computation
        # "before the Tape" of the next one
        if not checker.in_custom_grad:
            beforetape.untaped_launch(checker, compiled, rows)
        return
    beforetape.taped_launch(checker, compiled, facts, rows)
    if checker.python_reads:
        _values_passed(checker, compiled.ir.name, arg_names, scalars)
    # What the check of the derivative path finds depends on the kernel and the taint's
    # fields only (which kernel tainted a field is only named in a report): a kernel checked
    # against the same fields before, in this Tape or an earlier one, passes again and
    # taints what it tainted then.
    if not checker.taint and checker.paths_checked.get(compiled) is _UNTAINTED:
        return          # (the usual: no taint then and now, and the check added none)
    taint = checker.taint
    checked = checker.paths_checked.get(compiled)
    if checked is not None and checked[0] == tuple(taint):
        for target, entry in checked[1]:
            taint.setdefault(target, entry)
        return
    _check_path(checker, compiled, facts)


def _check_path(checker: LaunchChecker, compiled, facts) -> None:
    """Inside a Tape: a field without needs_grad on the derivative path (a store computed from
    a field with a gradient, or from one such a field tainted, into a field without one, which
    a later store reads into a field with a gradient), and what the kernel taints."""
    taint, kernel_name = checker.taint, compiled.ir.name
    before = tuple(taint)
    for target, sources, loc in facts.dependencies:
        differentiable = [s for s in sources if s.has_grad or s in taint]
        if not differentiable:
            continue
        if not target.has_grad:
            taint.setdefault(target, (loc, kernel_name))
            continue
        for source in differentiable:
            if not source.has_grad:
                checker.report(rules.missing_gradient_on_path(
                    kernel=kernel_name, field=source.name, read_loc=loc,
                    written_at=taint[source][0], writer=taint[source][1]))
                return
    added = tuple((fld, entry) for fld, entry in taint.items() if fld not in before)
    checker.paths_checked[compiled] = _UNTAINTED if not before and not added else (
        before, added)


_UNTAINTED = ((), ())      # paths_checked's entry for a kernel checked with no taint that
                           # added none (one object: a launch asks `is`, not `==`)


def _values_passed(checker: LaunchChecker, kernel_name, arg_names, scalars) -> None:
    """Inside a Tape: a scalar argument that is a field value Python scope read (a float
    carried around the Tape, so no gradient flows through it)."""
    for name, value in zip(arg_names, scalars):
        source = checker.python_reads.get(_key(value))
        if source is not None:
            fld, index, loc = source
            checker.report(rules.value_passed_around_tape(
                kernel=kernel_name, argument=name, field=fld.name, element=index,
                read=Access("read", loc, None, None, None, value)))


def _write_events(compiled) -> tuple:
    """(field, Access) per primal field the kernel writes, made once per kernel (its memos):
    `primal_changed` keeps only a field's latest write and nothing else holds these, so a
    launch just moves the time of its kernel's."""
    facts = kernel_facts(compiled)
    return tuple((fld, Access("store", facts.first_store[fld], compiled.ir.name))
                 for fld in facts.written)


def clear_zeroed_gradients(checker: LaunchChecker, compiled) -> None:
    """Before a launch: a kernel that leaves a gradient all zero clears it, as a Python-scope
    fill(0) does (DiffTaichi's clear_grid zeroes the grid's gradients before each recomputed
    step): what it held is gone, so no later check need look at it, nor keep what the launch
    overwrites of its primal for it. Here the gradients the IR proves it zeroes."""
    for grad in kernel_facts(compiled).grads_zeroed:
        checker.gradients_cleared((grad,), checker.tick())


def note_zeroed_gradients(checker: LaunchChecker, compiled, host) -> None:
    """After a launch: the gradients it stores into that the IR did not prove it zeroes, when
    they hold only zeros now. `host`: a field -> its array as it is now."""
    facts = kernel_facts(compiled)
    for grad in facts.grads_stored:
        if grad not in facts.grads_zeroed and not host(grad).any():
            checker.gradients_cleared((grad,), checker.tick())


def _key(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None



# ---- before a tangent (forward-mode) launch ---------------------------------------------------

def before_tangent(checker: LaunchChecker, compiled, kernel_name, dropped=None) -> None:
    """A tangent launch (forward mode), or with `dropped` given, the tangent of an adjoint
    (forward over reverse), which writes no primal value."""
    if dropped is None:
        facts = kernel_facts(compiled)
        for fld in facts.written:        # a tangent launch computes the values too
            checker.primal_changed[fld] = Access("store", facts.first_store[fld], kernel_name,
                                                 time=checker.tick())
    for fld, loc in compiled.dropped_tangents if dropped is None else dropped:
        checker.report(rules.missing_dual_on_path(kernel=kernel_name, field=fld.name,
                                                  store_loc=loc))
