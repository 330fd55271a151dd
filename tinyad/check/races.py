"""Which parallel-loop conflicts are errors: those a gradient can depend on.

A conflict between two iterations of a parallel loop (check/rules.py `parallel_conflict`) makes
what they leave in a field depend on the schedule. A gradient goes wrong through that only where
it can depend on the raced values: where they, or values computed from them (in this launch or
any later one, through values, indices, branches and loop bounds), reach
  * a field with a gradient (the loss, or anything on its path), or a gradient itself, or
  * a load an adjoint replays: a value, an index or a branch the adjoint recomputes (exactly the
    loads check/facts.py says it replays).
That is an error, raised as every rule's is: now in a Tape, else when the launch is
differentiated. Anywhere else (an integer counter or statistic read only by Python or by kernels
no gradient goes through) it is a warning naming both lines, shown once, and the fields the race
may have reached are watched: a later launch that carries them into a gradient raises the race's
error there. A field set whole from Python (fill, from_numpy) is no longer watched. Values that
go through Python scope (a field read into a kernel argument) are not followed: the gradient of
a launch given a number is the gradient at that number.

A launch that shows a conflict asks `RaceWatch.decide` (tinyad/checkedlaunch.py, for the
scatter check and the recorded accesses); the checker calls `follow` for each new launch.
"""
from __future__ import annotations

from dataclasses import dataclass

from tinyad.check import rules
from tinyad.check.facts import kernel_facts
from tinyad.check.render import print_report
from tinyad.check.report import Report
from tinyad.core import ir


@dataclass(frozen=True)
class Sink:
    """Where raced values reach a gradient in one kernel: `field` at `loc`, as `how`."""
    field: object
    loc: object
    how: str       # "stored" (a field with a gradient) or "replayed" (a load an adjoint replays)


class RaceWatch:
    """The races a checker has seen and where their values went (one per LaunchChecker)."""

    def __init__(self):
        self.tainted: dict = {}      # field -> the Report of the race whose values it may hold
        self.verdicts: dict = {}     # (launch number, field name) -> error? (the latest launch's)
        self.warned: set = set()     # (kernel, read line, write line) of the warnings shown

    def decide(self, launch, field_name: str, make_error, now: bool) -> bool:
        """A conflict between two iterations of `launch` on the field named `field_name`, whose
        ParallelConflictRuleError `make_error()` builds: -> True when it is an error (the caller
        raises it, or keeps it for the launch's adjoint, as for every rule); False when it was
        shown as a warning. `now`: in a Tape, where the caller raises it now. Asked again for
        every element of the launch; decided once."""
        key = (launch.number, field_name)
        verdict = self.verdicts.get(key)
        if verdict is not None:
            return verdict
        if len(self.verdicts) > 64 or any(k[0] != launch.number for k in self.verdicts):
            self.verdicts = {}
        error = make_error()
        raced = [f for f in ir.fields_of(launch.compiled.ir.body)
                 if f.name == field_name and f.role == "primal"]
        reached = reach(launch.compiled, raced) if raced else set()
        # (a field not found by its name: kept an error, as nothing can be proven of it)
        verdict = not raced or sink(launch.compiled, reached) is not None
        if not verdict or not now:      # (raised now, it stops the program: nothing to watch)
            for fld in reached:
                self.tainted.setdefault(fld, error.report)
            self._warn(error.report)
        self.verdicts[key] = verdict
        return verdict

    def follow(self, checker, launch) -> None:
        """A new launch: the watched fields it reads taint what it writes from them; where they
        reach a gradient, the race's error (now in a Tape, else when it is differentiated)."""
        compiled = launch.compiled
        sources = [f for f in kernel_facts(compiled).loaded if f in self.tainted]
        reached = reach(compiled, sources)
        for fld in _flows(compiled)[1] - reached:     # set anew from untainted values
            self.tainted.pop(fld, None)
        if not sources:
            return
        for fld in reached:
            if fld not in self.tainted:
                self.tainted[fld] = self.tainted[sources[0]]
        found = sink(compiled, reached)
        if found is None:
            return
        race = next(self.tainted[f] for f in (found.field, *sources) if f in self.tainted)
        error = rules.parallel_conflict_reaches_gradient(
            race, kernel=launch.kernel, field=found.field.name, loc=found.loc, how=found.how)
        if launch.tape and not checker.in_custom_primal:
            checker.report(error)
        else:
            launch.add_problem(error)

    def forget(self, fld) -> None:
        """`fld` was set whole from Python scope: it holds no raced values any more."""
        self.tainted.pop(fld, None)

    def _warn(self, report: Report) -> None:
        where = (report.kernel, *(a.loc for a in (report.read, report.write, *report.earlier)
                                  if a is not None))
        if where not in self.warned:
            self.warned.add(where)
            print_report(rules.parallel_conflict_off_the_gradient(report))


# ---- where values go within one kernel ---------------------------------------------------------

def reach(compiled, sources) -> set:
    """The fields whose values `compiled` may compute from any of `sources` (these included)."""
    flows = _flows(compiled)[0]
    reached, todo = set(sources), list(sources)
    while todo:
        fld = todo.pop()
        for target in flows.get(fld, ()):
            if target not in reached:
                reached.add(target)
                todo.append(target)
    return reached


def sink(compiled, reached) -> Sink | None:
    """The first place where `compiled` hands a value of the fields `reached` to a gradient: a
    store into one of them that has a gradient (or is one), or a load of one that its adjoint
    replays. None if there is none."""
    replayed = kernel_facts(compiled).replayed
    for stmt in ir.walk_stmts(compiled.ir.body):
        for expr in ir.stmt_exprs(stmt):     # (a statement's reads first: they say how)
            for sub in ir.walk_expr(expr):
                if isinstance(sub, ir.Load) and id(sub) in replayed and sub.field in reached:
                    return Sink(sub.field, sub.loc, "replayed")
        if isinstance(stmt, (ir.Store, ir.AtomicOp)) and stmt.field in reached and (
                stmt.field.role == "grad" or stmt.field.has_grad):
            return Sink(stmt.field, stmt.loc, "stored")
    return None


def _flows(compiled) -> tuple:
    """(field -> the fields written with something computed from it, the fields each launch
    sets whole), kept on the kernel. Set whole: a field of one scalar (a counter) stored at the
    kernel's top level, outside any branch or loop."""
    return compiled.memos[_new_flows]


def _new_flows(compiled) -> tuple:
    flows = {}
    for target, sources in _dependencies(compiled.ir.body).items():
        for source in sources:
            flows.setdefault(source, set()).add(target)
    body = compiled.ir.body
    leaves = any(isinstance(s, ir.Return) for s in ir.walk_stmts(body))  # (maybe early)
    whole = set() if leaves else {s.field for s in body if isinstance(s, ir.Store)
                                  and ir.array_size(s.field) == 1}
    return flows, whole


def _dependencies(body) -> dict:
    """For each field a kernel writes: every field its stores' values, indices, enclosing
    branches and loop bounds may depend on, through locals, flow-insensitively (a fixed point,
    as locals feed each other around loops). A branch that leaves a loop or the kernel early
    (`break`, `return`) makes everything in it depend on its condition."""
    local: dict = {}          # local name -> fields its value may depend on
    into: dict = {}           # written field -> fields

    def of(exprs) -> set:
        out = set()
        for expr in exprs:
            for sub in ir.walk_expr(expr):
                if isinstance(sub, ir.Load):
                    out.add(sub.field)
                elif isinstance(sub, ir.Var):
                    out |= local.get(sub.name, set())
        return out

    def leaves(block) -> bool:
        return any(isinstance(s, (ir.Break, ir.Return)) for s in ir.walk_stmts(block))

    def exits(block) -> set:      # the conditions of the branches that leave early
        return of(s.cond for s in ir.walk_stmts(block)
                  if isinstance(s, ir.If) and leaves(s.then + s.orelse))

    def add(table, key, found) -> bool:
        held = table.setdefault(key, set())
        grew = not found <= held
        held |= found
        return grew

    def visit(block, context) -> bool:
        grew = False
        for stmt in block:
            if isinstance(stmt, ir.Assign):
                grew |= add(local, stmt.name, of([stmt.value]) | context)
            elif isinstance(stmt, (ir.Store, ir.AtomicOp)):
                found = of([*stmt.indices, stmt.value]) | context
                grew |= add(into, stmt.field, found)
                if isinstance(stmt, ir.AtomicOp) and stmt.result is not None:
                    grew |= add(local, stmt.result, found | {stmt.field})
            elif isinstance(stmt, ir.If):
                inner = context | of([stmt.cond])
                grew |= visit(stmt.then, inner) | visit(stmt.orelse, inner)
            elif isinstance(stmt, (ir.For, ir.While)):
                inner = context | of(ir.stmt_exprs(stmt)) | exits(stmt.body)
                grew |= visit(stmt.body, inner)
        return grew

    while visit(body, exits(body)):
        pass
    return into
