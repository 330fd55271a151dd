"""An adjoint a manual sweep skipped: kernel.grad() calls outside a Tape (a hand-written backward
pass, a checkpointed segment that recomputes its kernels and differentiates them) that handed a
gradient to a field a forward launch wrote, and never ran that launch's adjoint, before a
gradient it would have added to is read. Warp's guide has the checkpointed form: a segment that
chains only some adjoints. Taichi gives the truncated gradient without a word.

After each manual adjoint of a launch M, the latest writer of each differentiated field M read
is looked for among the launches just before it. That writer L is *passed* when its adjoint has
not run, the rows it wrote meet those M read, and Python has not written the field since L: the
sweep reached L's output. When a gradient G is read (in Python, or by a kernel outside a Tape),
a passed launch whose adjoint has still not run, and whose output's gradient is nonzero on the
rows it wrote, is reported if its adjoint would add to G, directly or through launches before it
whose adjoints have not run either (each the latest writer of a field the next one read). Only
launches outside a Tape count; a recompute that was differentiated stands for the launch it
repeats (tinyad/check/launches.py Launch.repeats).
A read in the middle of a correct sweep looks the same (the adjoints still to come have not run
yet), so the read is only remembered, and the warning is shown when the gradient is used as if
final with the skipped adjoint still not run: its parameter written (an optimiser step, in Python
or by a kernel), the gradient cleared, or a Tape begun. A sweep that goes on and runs that
adjoint (a DiffTaichi loop looking at x.grad at each step) is silent.

What it costs: a look back over a few launches per manual adjoint, and at a gradient read, only
the passed launches still not differentiated (none, after a complete sweep); a Tape's program
pays nothing."""
from __future__ import annotations

from tinyad.check import rules
from tinyad.check.facts import kernel_facts
from tinyad.check.report import Access

# How far back a launch's writers are looked for: a step's few kernels (a writer further back
# is not followed: a skipped adjoint missed, never a false report)
LOOK_BACK = 64


def rows_touched(launch):
    """(rows read, rows written) per field, as RowSpans."""
    if launch.row_source is not None:
        loads, writes, make = launch.row_source
        launch.read_rows, launch.wrote_rows = make(loads, writes)
        launch.row_source = None
    return launch.read_rows or {}, launch.wrote_rows or {}


class ManualSweeps:
    """One per rule checker, held by its LostGradients."""

    def __init__(self, checker, warn):
        self.checker = checker
        self.warn = warn             # shows a warning's report once per pair of lines
        self.adjoint_at = 0          # when a manual adjoint last ran (0: never)
        self.python_wrote: dict = {}  # primal field -> when Python scope last wrote it
        self.checked: dict = {}      # grad -> the state of the history it was last checked at
        self.reads: dict = {}        # grad -> (report, skipped launch) of a read awaiting use
        self.passed: list = []       # (launch, field, later launch): passed, not differentiated

    def manual_adjoint_ran(self, launch) -> None:
        """A manual adjoint of `launch` (None: its forward launch is not known) has run: the
        launches it took a gradient from are passed, until their own adjoints run."""
        self.adjoint_at = self.checker.tick()
        if launch is not None and not launch.tape:
            self.passed = [entry for entry in self.passed if _pending(entry[0])]
            self.passed += [(source, fld, launch) for fld, source in self._sources(launch)]

    def written(self, fld, python: bool = True) -> None:
        """`fld` (a primal or a gradient) is written outside a Tape (by Python scope, or by a
        kernel): a gradient read after a skipped adjoint is used now, if that adjoint has
        still not run."""
        if python and fld.role == "primal":
            self.python_wrote[fld] = self.checker.tick()
        if self.reads:
            self._settle(fld.grad if fld.role == "primal" else fld)

    def used_all(self) -> None:
        """A Tape begins: every gradient read so far was final."""
        if not self.reads:
            return
        for grad in list(self.reads):
            self._settle(grad)

    def _settle(self, grad) -> None:
        held = self.reads.pop(grad, None)
        if held is not None and not held[1].adjoint_runs:
            self.warn(held[0])

    def read(self, grad, read_loc, reader=None) -> None:
        """`grad` is read at `read_loc` (by the kernel `reader`, or Python): remember the
        warning's report if a manual sweep skipped an adjoint that would add to it."""
        checker = self.checker
        if not self.adjoint_at or checker.tape is not None:
            return
        state = (checker.launches, self.adjoint_at)
        if self.checked.get(grad) == state:
            return
        self.checked[grad] = state
        found = self._first_skipped(grad)
        if found is None:
            return
        launch, fld, later, more = found
        self.reads[grad] = (rules.adjoint_skipped(
            kernel=launch.kernel, launch=launch.number, field=fld.name,
            later_kernel=later.kernel, gradient=grad.name, more=more,
            store_loc=kernel_facts(launch.compiled).first_store.get(fld),
            read=Access(kind="read", loc=read_loc, kernel=reader)), launch)

    def _first_skipped(self, grad):
        """(the passed launch, the field, the later launch, how many more launches the
        gradient would pass through to reach `grad`) for the latest passed launch from which
        `grad` is reached, or None."""
        self.passed = [entry for entry in self.passed if _pending(entry[0])]
        for launch, fld, later in reversed(self.passed):
            if not _nonzero_on(fld.grad, rows_touched(launch)[1].get(fld)):
                continue
            depth = self._reaches(launch, grad)
            if depth is not None:
                return launch, fld, later, depth
        return None

    def _sources(self, launch):
        """[(field, launch)]: for each differentiated field `launch` loaded, its latest writer
        before it (looked for among the LOOK_BACK launches before it in the history) if that
        writer's adjoint has not run, the rows meet, and Python has not written the field
        since that writer."""
        history = self.checker.history
        at = launch.number - history[0].number if history else -1
        if not 0 <= at < len(history) or history[at] is not launch:
            return []          # (left the history)
        loaded = kernel_facts(launch.compiled).loads_differentiable
        writers, unseen = {}, set(loaded)     # field -> its latest writer (one walk back)
        for back in range(at - 1, max(at - 1 - LOOK_BACK, -1), -1):
            if not unseen:
                break
            source = history[back]
            for fld in kernel_facts(source.compiled).written:
                if fld in unseen:
                    unseen.discard(fld)
                    writers[fld] = source
        found = []
        for fld in loaded:
            source = writers.get(fld)
            if source is not None and _pending(source) and \
                    self.python_wrote.get(fld, 0) < source.time and \
                    _rows_meet(rows_touched(source)[1].get(fld), rows_touched(launch)[0].get(fld)):
                found.append((fld, source))
        return found

    def _reaches(self, launch, grad):
        """How many launches past `launch` its gradient passes through to be added to `grad`
        (0: its own adjoint adds to it), or None where it never is."""
        frontier, seen, depth = [launch], {id(launch)}, 0
        while frontier and depth <= LOOK_BACK:
            if any(grad in kernel_facts(one.compiled).adjoint_targets for one in frontier):
                return depth
            upstream = []
            for one in frontier:
                for _, source in self._sources(one):
                    if id(source) not in seen:
                        seen.add(id(source))
                        upstream.append(source)
            frontier, depth = upstream, depth + 1
        return None


def _pending(launch) -> bool:
    """A launch outside a Tape whose adjoint has not run."""
    return not launch.tape and not launch.adjoint_runs


def _rows_meet(wrote, read) -> bool:
    """Do the rows one launch wrote and the rows another read meet? Unknown rows do."""
    if not wrote or not read:
        return True
    return bool(wrote & read)


def _nonzero_on(grad, rows) -> bool:
    """Does `grad` hold a nonzero on `rows` (the rows its primal's writer wrote)?"""
    data = grad.data
    if data is None:
        return False
    if rows is None or data.ndim == 0:
        return bool(data.any())
    return any(data[lo:hi].any() for lo, hi in rows.spans)
