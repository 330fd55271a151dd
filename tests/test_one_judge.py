"""One decider per element-level rule (issue 34, "one judge"): which library modules build each
report of a rule broken on an element, read from the source. The rule catalogue
(tinyad/check/rules.py) words every report; the judge (tinyad/check/trail.py) is the only module
that asks it for a parallel conflict or an overwrite of a replayed read, whichever backend met
the access, so the two modes cannot drift apart on which rule or which lines a report names.
The rules still decided once per backend are listed, and the list may only shrink. Then the
judge's verdict on an overwrite seen by either backend: the same report in both modes."""
import ast
import pathlib

import numpy as np
import pytest
from conftest import MODES

import tinyad as ti

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = ("tinyad", "interp", "compile")
CATALOGUE = "tinyad/check/rules.py"
JUDGE = "tinyad/check/trail.py"

# the element-level rules the judge alone decides
JUDGED = ("parallel_conflict", "overwrite_after_read", "read_then_overwrite", "second_write",
          "read_during_accumulation")
# the rules still decided by each backend (the cross-launch state is per backend: interp's
# element summaries, fast mode's copies); an entry may only go
PER_BACKEND = {
    "python_overwrite": {"interp/accesslog.py", "compile/replaycheck.py"},
    "replay_divergence": {"interp/accesslog.py", "compile/replaycheck.py"},
    "custom_gradient_assigns": {"interp/accesslog.py", "compile/customstores.py"},
}


def rule_callers(files: dict) -> dict:
    """rule constructor -> the files (path -> source) that call it, as `rules.name(...)` or as
    a name imported from the catalogue."""
    found: dict = {}
    for path, source in files.items():
        tree = ast.parse(source)
        imported = {alias.asname or alias.name: alias.name for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module == "tinyad.check.rules"
                    for alias in node.names}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                    func.value.id == "rules":
                found.setdefault(func.attr, set()).add(path)
            elif isinstance(func, ast.Name) and func.id in imported:
                found.setdefault(imported[func.id], set()).add(path)
    return found


def library_files() -> dict:
    files = {str(p.relative_to(ROOT)): p.read_text() for package in LIBRARY
             for p in sorted((ROOT / package).rglob("*.py"))}
    del files[CATALOGUE]
    return files


def test_the_judge_alone_decides_conflicts_and_overwrites():
    callers = rule_callers(library_files())
    for rule in JUDGED:
        assert callers.get(rule, set()) <= {JUDGE}, f"{rule} is decided outside the judge"
    assert callers["parallel_conflict"] == callers["overwrite_after_read"] == {JUDGE}


def test_the_rules_still_decided_per_backend_only_shrink():
    callers = rule_callers(library_files())
    for rule, where in PER_BACKEND.items():
        assert callers.get(rule, set()) <= where, f"{rule} has a new decider"


def test_a_decider_outside_the_judge_is_caught():
    """The finder sees a backend building a conflict or overwrite report itself, either way of
    naming the constructor; the judge's own calls pass."""
    files = {
        JUDGE: "from tinyad.check import rules\nrules.parallel_conflict(kernel='k')\n",
        "interp/accesslog.py": "from tinyad.check import rules\n"
                               "def f():\n    return rules.overwrite_after_read(field='x')\n",
        "compile/replaycheck.py": "from tinyad.check.rules import read_then_overwrite as r1\n"
                                  "r1(field='x')\n",
    }
    callers = rule_callers(files)
    assert callers["parallel_conflict"] == {JUDGE}
    assert callers["overwrite_after_read"] == {"interp/accesslog.py"}
    assert callers["read_then_overwrite"] == {"compile/replaycheck.py"}


BOTH = pytest.mark.skipif(MODES != ["interp", "fast"], reason="needs both modes")


def _earlier_launch_then_own_writes(mode, earlier, own):
    """A launch of the Tape writes x (`earlier`: stores or adds), then a launch reads x[i] for
    its adjoint between writes of its own (`own`); -> the report raised."""
    ti.init(mode=mode)
    x = ti.field(ti.f64, shape=4, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def first():
        for i in range(4):
            if ti.static(earlier == "store"):
                x[i] = 1.0
            else:
                x[i] += 1.0

    @ti.kernel
    def then():
        for i in range(4):
            if ti.static(own[0] == "add"):
                x[i] += 2.0
            if ti.static(own[0] == "store"):
                x[i] = 2.0
            loss[None] += x[i] ** 2
            if ti.static(own[1] == "add"):
                x[i] += 3.0
            else:
                x[i] = 3.0

    x.from_numpy(np.linspace(0.5, 1.5, 4))
    with pytest.raises(ti.AutodiffRuleError) as info, ti.ad.Tape(loss):
        first()
        then()
    return info.value.report


@BOTH
@pytest.mark.parametrize(("earlier", "own", "rule", "named"), [
    ("store", (None, "add"), "Global Data Access Rule 1", None),
    ("store", ("add", "add"), "Read during accumulation", "then"),
    ("store", (None, "store"), "Global Data Access Rule 2", "first"),
    ("store", ("store", "store"), "Global Data Access Rule 2", "first"),
    ("add", (None, "add"), "Read during accumulation", "first"),
    ("add", ("add", "add"), "Read during accumulation", "first"),
    ("add", (None, "store"), "Global Data Access Rule 2", "first"),
    ("add", ("store", "store"), "Global Data Access Rule 2", "first"),
])
def test_a_launchs_overwrite_counts_the_tapes_earlier_writes_alike(earlier, own, rule, named):
    """Which rule a launch's own overwrite of a replayed read breaks counts the element's
    writes by earlier launches of the Tape (fast mode tells its trail's verdict again with
    them): the first write, or the first += where the overwrite adds, which may be the
    launch's own += when the earlier launch stored. Both modes ask one judge
    (tinyad/check/trail.py changed_after_read) and raise the same report."""
    interp, fast = (_earlier_launch_then_own_writes(mode, earlier, own) for mode in MODES)
    assert interp.to_dict() == fast.to_dict()
    assert interp.rule == rule
    assert [a.kernel for a in interp.earlier] == ([named] if named else [])
