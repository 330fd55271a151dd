"""Checks around launches: the misuse that silently zeroes or doubles gradients.

Per kernel, a few facts from its IR (which fields it writes and reads, which loads its adjoint
replays, which fields each store depends on); per launch, checks that use them:
  * kernel.grad() with no output adjoint seeded, or on a kernel that writes no gradient field;
  * adjoints run out of order (a later launch read this launch's output and is not yet undone);
  * gradients accumulating across manual rounds without clearing (a warning: it may be meant);
  * a field without needs_grad on the derivative path inside a Tape;
  * a field without needs_dual on the tangent path of a forward-mode launch;
  * a field value carried into a kernel's scalar argument inside a Tape;
  * a custom gradient (grad_for) that assigns into .grad instead of accumulating.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyad.check import rules
from tinyad.check.render import print_report
from tinyad.check.rules import Access
from tinyad.core import analysis, ir
from tinyad.core.errors import TinyadError
from tinyad.core.srcloc import user_loc
from tinyad.interp.accesslog import Checker


@dataclass(frozen=True)
class KernelFacts:
    written: tuple          # primal fields stored or accumulated into
    loaded: tuple           # primal fields loaded
    replayed: frozenset     # id() of the loads the adjoint kernel replays
    dependencies: tuple     # (target field, source fields, store loc) per store
    first_store: dict       # field -> loc of its first store
    first_load: dict        # field -> loc of its first load
    adjoint_targets: tuple  # the .grad fields the adjoint kernel accumulates into


def kernel_facts(compiled) -> KernelFacts:
    facts = getattr(compiled, "facts", None)
    if facts is None:
        facts = compiled.facts = _analyse(compiled)
    return facts


def _analyse(compiled) -> KernelFacts:
    body = compiled.ir.body
    written, loaded, first_store, first_load = {}, {}, {}, {}
    for stmt in ir.walk_stmts(body):
        if isinstance(stmt, (ir.Store, ir.AtomicOp)) and stmt.field.role == "primal":
            written.setdefault(id(stmt.field), stmt.field)
            first_store.setdefault(stmt.field, stmt.loc)
        for expr in ir.stmt_exprs(stmt):
            for sub in ir.walk_expr(expr):
                if isinstance(sub, ir.Load) and sub.field.role == "primal":
                    loaded.setdefault(id(sub.field), sub.field)
                    first_load.setdefault(sub.field, sub.loc)
    try:
        adjoint = compiled.adjoint_ir()
        replayed = frozenset(id(load) for load in analysis.replayed_loads(adjoint))
        targets = {id(s.field): s.field for s in ir.walk_stmts(adjoint.body)
                   if isinstance(s, ir.AtomicOp) and s.field.role == "grad"}
    except TinyadError:   # not differentiable: reported if its .grad() is ever called
        replayed, targets = frozenset(), {}
    return KernelFacts(tuple(written.values()), tuple(loaded.values()), replayed,
                       _dependencies(body), first_store, first_load, tuple(targets.values()))


def after_adjoint(checker: Checker, compiled, launch) -> None:
    checker.adjoint_ran(launch)
    for grad in kernel_facts(compiled).adjoint_targets:
        checker.grad_accumulated(grad)
        _remember_gradient_point(checker, grad)


def _remember_gradient_point(checker: Checker, grad) -> None:
    """Keep the values of `grad`'s primal at which this gradient was taken: once per sweep (a
    new copy only when the primal changed since the last one)."""
    held = checker.grad_point.get(grad)
    changed = checker.primal_changed.get(grad.primal)
    if held is not None and (changed is None or changed.time < held[2]):
        return
    sweep = Access("gradient taken", user_loc())
    checker.grad_point[grad] = (grad.primal.data.copy(), sweep, checker.tick())


def _dependencies(body) -> tuple:
    """For each store: the float fields its value depends on (through locals, flow-insensitive)."""
    local_sources: dict[str, set] = {}

    def sources(expr) -> set:
        out = set()
        for sub in ir.walk_expr(expr):
            if isinstance(sub, ir.Load) and sub.field.dtype.is_float:
                out.add(sub.field)
            elif isinstance(sub, ir.Var):
                out |= local_sources.get(sub.name, set())
        return out
    changed = True
    while changed:   # locals can feed each other around loops: iterate to a fixed point
        changed = False
        for stmt in ir.walk_stmts(body):
            if isinstance(stmt, ir.Assign):
                found = sources(stmt.value)
                if not found <= local_sources.setdefault(stmt.name, set()):
                    local_sources[stmt.name] |= found
                    changed = True
    return tuple((s.field, frozenset(sources(s.value)), s.loc) for s in ir.walk_stmts(body)
                 if isinstance(s, (ir.Store, ir.AtomicOp)) and s.field.dtype.is_float)


# ---- before a forward launch ----------------------------------------------------------------

def before_forward(checker: Checker, compiled, kernel_name, arg_names, scalars) -> None:
    facts = kernel_facts(compiled)
    for fld in facts.written:
        checker.primal_changed[fld] = Access("store", facts.first_store[fld], kernel_name,
                                             time=checker.tick())
    if checker.tape is None:
        _remember_derivations(checker, facts, kernel_name)
        return
    _check_computed_before_tape(checker, facts, kernel_name)
    for name, value in zip(arg_names, scalars):
        source = checker.python_reads.get(_key(value))
        if source is not None:
            fld, index, loc = source
            checker.report(rules.value_passed_around_tape(
                kernel=kernel_name, argument=name, field=fld.name, element=index,
                read=Access("read", loc, None, None, None, value)))
    facts = kernel_facts(compiled)
    for target, sources, loc in facts.dependencies:
        differentiable = {s for s in sources if s.grad is not None or s in checker.taint}
        if not differentiable:
            continue
        if target.grad is None:
            checker.taint.setdefault(target, loc)
            continue
        for source in differentiable:
            if source.grad is None:
                checker.report(rules.missing_gradient_on_path(
                    kernel=kernel_name, field=source.name, read_loc=loc,
                    written_at=checker.taint[source]))
                return


def _remember_derivations(checker: Checker, facts: KernelFacts, kernel_name: str) -> None:
    """Outside a Tape: which fields this kernel computes from a field that needs a gradient."""
    for target, sources, loc in facts.dependencies:
        differentiable = [s for s in sources if s is not target and s.grad is not None]
        if differentiable:
            checker.derived_outside_tape[target] = (kernel_name, loc, differentiable[0])
        else:
            checker.derived_outside_tape.pop(target, None)


def _check_computed_before_tape(checker: Checker, facts: KernelFacts, kernel_name: str) -> None:
    """Inside a Tape: a taped kernel reads a field computed from a parameter before the Tape
    (a warning: the gradient stops at that field, which may be meant)."""
    for fld in facts.loaded:
        derived = checker.derived_outside_tape.get(fld)
        if (derived is None or fld in checker.written_in_tape or fld in checker.warned_in_tape
                or fld.grad is None):
            continue
        checker.warned_in_tape.add(fld)
        kernel, loc, source = derived
        print_report(rules.computed_before_tape(
            field=fld.name, source=source.name, write_loc=loc, kernel=kernel,
            taped_kernel=kernel_name, read_loc=facts.first_load[fld]))
    checker.written_in_tape.update(facts.written)


def _key(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# ---- before a tangent (forward-mode) launch ---------------------------------------------------

def before_tangent(checker: Checker, compiled, kernel_name, dropped=None) -> None:
    for fld, loc in compiled.dropped_tangents if dropped is None else dropped:
        checker.report(rules.missing_dual_on_path(kernel=kernel_name, field=fld.name,
                                                  store_loc=loc))


# ---- before an adjoint launch ----------------------------------------------------------------

def before_adjoint(checker: Checker, compiled, kernel_name, launch, manual: bool) -> None:
    if launch is not None:
        for problem in launch.problems:
            checker.report(problem)
        launch.problems.clear()
    if not manual:
        return
    facts = kernel_facts(compiled)
    _check_gradient_point(checker, facts, kernel_name)
    if launch is not None:   # the specific diagnoses first: they explain an unseeded output too
        _check_order(checker, launch, facts, kernel_name)
        _check_rounds(checker, launch, facts, kernel_name)
    outputs = [f for f in facts.written if f.grad is not None]
    if not outputs:
        checker.report(rules.no_output_gradient(kernel=kernel_name))
        return
    if not any(f.grad.data.any() for f in outputs):
        checker.report(rules.unseeded_outputs(kernel=kernel_name, outputs=[f.name for f in outputs],
                                      first_store=facts.first_store[outputs[0]]))


def _check_gradient_point(checker, facts, kernel_name):
    """A manual sweep that adds to a gradient still holding the gradient at other values of its
    parameter (changed since, by Python or a kernel, and not cleared)."""
    for grad in facts.adjoint_targets:
        held = checker.grad_point.get(grad)
        if held is None or checker.grad_cleared_at.get(grad, 0) > held[2]:
            continue
        values, sweep, _ = held
        primal = grad.primal
        if not grad.data.any() or np.array_equal(primal.data, values, equal_nan=True):
            continue
        checker.report(rules.gradient_at_two_points(
            kernel=kernel_name, gradient=grad.name, param=primal.name, earlier=sweep,
            change=checker.primal_changed.get(primal), call_loc=user_loc()))
        return


def _check_order(checker, launch, facts, kernel_name):
    produced = {f: rows for f, rows in launch.wrote_rows.items() if f.grad is not None}
    for later in checker.history:
        if later.time <= launch.time or later.adjoint_runs:
            continue
        later_facts = kernel_facts(later.compiled)
        shared = [f for f, rows in produced.items() if rows & later.read_rows.get(f, set())]
        seeded = [f for f in later_facts.written if f.grad is not None and f.grad.data.any()]
        if shared and seeded:
            checker.report(rules.adjoints_out_of_order(
                kernel=kernel_name, launch=launch.number, later_kernel=later.kernel,
                later_launch=later.number, field=shared[0].name))
            return


def _check_rounds(checker, launch, facts, kernel_name):
    for fld in facts.loaded:
        grad = fld.grad
        if grad is None:
            continue
        accumulated = checker.grad_accumulated_at.get(grad)
        cleared = checker.grad_cleared_at.get(grad, 0)
        if (accumulated is not None and cleared < accumulated < launch.origin.time
                and grad.data.any()):
            print_report(rules.gradient_accumulates_across_rounds(
                kernel=kernel_name, gradient=grad.name, call_loc=user_loc()))
            checker.grad_cleared_at[grad] = checker.tick()   # say it once per round
