"""Checks around launches: the misuse that silently zeroes or doubles gradients.

Per kernel, a few facts from its IR (which fields it writes and reads, which loads its adjoint
replays, which fields each store depends on); per launch, checks that use them:
  * kernel.grad() with no output adjoint seeded, or on a kernel that writes no gradient field;
  * adjoints run out of order (a later launch read this launch's output and is not yet undone);
  * gradients accumulating across manual rounds without clearing (a warning: it may be meant);
  * a field without needs_grad on the derivative path inside a Tape;
  * a field value carried into a kernel's scalar argument inside a Tape;
  * a custom gradient (grad_for) that assigns into .grad instead of accumulating.
"""
from __future__ import annotations

from dataclasses import dataclass

from tinyad.core import ir
from tinyad.core.errors import TinyadError
from tinyad.check.rules import Access, Report, SilentZeroRuleError
from tinyad.runtime import runtime

from tinyad.interp.accesslog import Checker, user_loc
from tinyad.check.render import print_report


@dataclass(frozen=True)
class KernelFacts:
    written: tuple          # primal fields stored or accumulated into
    loaded: tuple           # primal fields loaded
    replayed: frozenset     # id() of the loads the adjoint kernel replays
    dependencies: tuple     # (target field, source fields, store loc) per store
    first_store: dict       # field -> loc of its first store
    adjoint_targets: tuple  # the .grad fields the adjoint kernel accumulates into


def kernel_facts(compiled) -> KernelFacts:
    facts = getattr(compiled, "facts", None)
    if facts is None:
        facts = compiled.facts = _analyse(compiled)
    return facts


def _analyse(compiled) -> KernelFacts:
    body = compiled.ir.body
    written, loaded, first_store = {}, {}, {}
    for stmt in ir.walk_stmts(body):
        if isinstance(stmt, (ir.Store, ir.AtomicOp)) and stmt.field.role == "primal":
            written.setdefault(id(stmt.field), stmt.field)
            first_store.setdefault(stmt.field, stmt.loc)
        for expr in ir.stmt_exprs(stmt):
            for sub in ir.walk_expr(expr):
                if isinstance(sub, ir.Load) and sub.field.role == "primal":
                    loaded.setdefault(id(sub.field), sub.field)
    try:
        adjoint = compiled.adjoint_ir()
        replayed = frozenset(id(sub) for stmt in ir.walk_stmts(adjoint.body)
                             for expr in ir.stmt_exprs(stmt) for sub in ir.walk_expr(expr)
                             if isinstance(sub, ir.Load) and sub.field.role == "primal")
        targets = {id(s.field): s.field for s in ir.walk_stmts(adjoint.body)
                   if isinstance(s, ir.AtomicOp) and s.field.role == "grad"}
    except TinyadError:   # not differentiable: reported if its .grad() is ever called
        replayed, targets = frozenset(), {}
    return KernelFacts(tuple(written.values()), tuple(loaded.values()), replayed,
                       _dependencies(body), first_store, tuple(targets.values()))


def after_adjoint(checker: Checker, compiled, launch) -> None:
    checker.adjoint_ran(launch)
    for grad in kernel_facts(compiled).adjoint_targets:
        checker.grad_accumulated(grad)


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


# ---- the checker of this ti.init ----------------------------------------------------------------

def report(error) -> None:
    """A violation: raised (check="error") or shown and passed over (check="warn"). In warn
    mode a violation at the same lines as an earlier one (the next iteration, the next launch)
    is counted but not shown again."""
    runtime.violations += 1
    if runtime.config.check != "warn":
        raise error
    r = error.report
    signature = (r.rule, r.kernel, r.read.loc if r.read else None, r.write.loc if r.write else None)
    shown = runtime.checker.shown if runtime.checker is not None else set()
    if signature not in shown:
        shown.add(signature)
        print_report(r)


def get_checker() -> Checker:
    checker = runtime.checker
    if checker is None or checker.generation != runtime.generation:
        checker = runtime.checker = Checker(runtime.generation, report)
    return checker


# ---- before a forward launch ----------------------------------------------------------------

def before_forward(checker: Checker, compiled, kernel_name, arg_names, scalars) -> None:
    if checker.tape is None:
        return
    for name, value in zip(arg_names, scalars):
        source = checker.python_reads.get(_key(value))
        if source is not None:
            fld, index, loc = source
            element = f"{fld.name}[{', '.join(map(str, index))}]"
            report(SilentZeroRuleError(Report(
                "Value passed around the tape",
                f"{kernel_name}'s argument '{name}' is {element}, read in Python scope inside "
                "the Tape: the gradient through it is lost.", kernel_name, fld.name, index,
                Access("read", loc, None, None, None, value), None, [],
                f"{fld.name}.grad gets nothing from {kernel_name}'s use of '{name}'",
                f"read {element} inside the kernel instead of passing it as an argument (or "
                "read it before the Tape if it is meant as a constant)")))
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
                origin = checker.taint[source]
                report(SilentZeroRuleError(Report(
                    "Missing gradient on the path",
                    f"{source.name} carries values that depend on differentiated fields, but it "
                    "has no gradient field: gradients through it are silently zero.",
                    kernel_name, source.name, None,
                    Access("read", loc, kernel_name), Access("store", origin, None), [],
                    f"everything upstream of {source.name} gets no gradient from this kernel",
                    f"declare {source.name} with needs_grad=True (or call ti.root.lazy_grad())")))
                return


def _key(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# ---- before an adjoint launch ----------------------------------------------------------------

def before_adjoint(checker: Checker, compiled, kernel_name, launch, manual: bool) -> None:
    if launch is not None:
        for problem in launch.problems:
            report(problem)
        launch.problems.clear()
    if not manual:
        return
    facts = kernel_facts(compiled)
    if launch is not None:   # the specific diagnoses first: they explain an unseeded output too
        _check_order(checker, launch, facts, kernel_name)
        _check_rounds(checker, launch, facts, kernel_name)
    outputs = [f for f in facts.written if f.grad is not None]
    if not outputs:
        report(SilentZeroRuleError(Report(
            "Unseeded gradient", f"{kernel_name} writes no field that has a gradient, so "
            f"{kernel_name}.grad() can only produce zeros.", kernel_name, None, None, None,
            None, [], "every gradient it computes is zero",
            "declare the kernel's output fields with needs_grad=True")))
        return
    if not any(f.grad.data.any() for f in outputs):
        names = ", ".join(f"{f.name}.grad" for f in outputs)
        report(SilentZeroRuleError(Report(
            "Unseeded gradient", f"{kernel_name}.grad() runs with every output adjoint zero "
            f"({names}).", kernel_name, outputs[0].name, None, None,
            Access("store", facts.first_store[outputs[0]], kernel_name), [],
            "all gradients it produces are zero",
            f"seed the output first, e.g. {outputs[0].name}.grad[None] = 1 for a 0-D loss, "
            "or use ti.ad.Tape(loss)")))


def _check_order(checker, launch, facts, kernel_name):
    produced = {f: rows for f, rows in launch.wrote_rows.items() if f.grad is not None}
    for later in checker.history:
        if later.time <= launch.time or later.adjoint_runs:
            continue
        later_facts = kernel_facts(later.compiled)
        shared = [f for f, rows in produced.items() if rows & later.read_rows.get(f, set())]
        seeded = [f for f in later_facts.written if f.grad is not None and f.grad.data.any()]
        if shared and seeded:
            fld = shared[0]
            report(SilentZeroRuleError(Report(
                "Adjoints out of order",
                f"{later.kernel} (launch #{later.number}) read {fld.name} after {kernel_name} "
                f"(launch #{launch.number}) wrote it, and its gradient has not run yet.",
                kernel_name, fld.name, None, None, None, [],
                f"{fld.name}.grad is still missing {later.kernel}'s contribution, so "
                f"{kernel_name}.grad() would pass on an incomplete gradient",
                f"call the .grad() of later kernels first: {later.kernel}.grad() before "
                f"{kernel_name}.grad() (reverse launch order), or use ti.ad.Tape")))
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
            print_report(Report(
                "Gradient accumulates across rounds (warning)",
                f"{grad.name} still holds the gradient of an earlier round when "
                f"{kernel_name}.grad() adds this round's.", kernel_name, grad.name, None,
                None, Access("python call", user_loc(), None), [],
                f"{grad.name} is the sum of several rounds, not this round's gradient",
                f"clear it between rounds ({grad.name}.fill(0) or "
                "ti.ad.clear_all_gradients()), unless the sum is what you want"))
            checker.grad_cleared_at[grad] = checker.tick()   # say it once per round
