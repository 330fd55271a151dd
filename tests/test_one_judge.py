"""One decider per element-level rule (issue 34, "one judge"): which library modules build each
report of a rule broken on an element, read from the source. The rule catalogue
(tinyad/check/rules.py) words every report; the judge (tinyad/check/trail.py, for what happens
within a launch, and tinyad/check/changes.py, for values changed between launches) is the only
module that asks it for a parallel conflict, an overwrite of a replayed read (within a launch or
from Python scope), a replay divergence or a gradient a grad_for function assigns, whichever
backend met the access, so the two modes cannot drift apart on which rule or which lines a
report names. No rule is decided once per backend (`PER_BACKEND` is empty, and stays so), and
every rule of the catalogue has one caller. Then the judge's verdict on an overwrite seen by
either backend: the same report in both modes."""
import ast
import functools
import pathlib

import numpy as np
import pytest
from conftest import MODES

import tinyad as ti

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = ("tinyad", "interp", "compile")
CATALOGUE = "tinyad/check/rules.py"
JUDGE = "tinyad/check/trail.py"
JUDGE_ACROSS_LAUNCHES = "tinyad/check/changes.py"

# the element-level rules the judge alone decides: within one launch's trail, and across launches
JUDGED = {"parallel_conflict": JUDGE, "overwrite_after_read": JUDGE, "read_then_overwrite": JUDGE,
          "second_write": JUDGE, "read_during_accumulation": JUDGE,
          "python_overwrite": JUDGE_ACROSS_LAUNCHES, "replay_divergence": JUDGE_ACROSS_LAUNCHES,
          "custom_gradient_assigns": JUDGE_ACROSS_LAUNCHES}
# the rules still decided by each backend: none (an entry here is a second decider of a rule)
PER_BACKEND: dict = {}


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


def _catalogue_constructors() -> tuple:
    """The rule constructors of the catalogue: its public functions."""
    tree = ast.parse((ROOT / CATALOGUE).read_text())
    return tuple(node.name for node in tree.body
                 if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"))


RULES = _catalogue_constructors()


def library_files() -> dict:
    files = {str(p.relative_to(ROOT)): p.read_text() for package in LIBRARY
             for p in sorted((ROOT / package).rglob("*.py"))}
    del files[CATALOGUE]
    return files


@functools.cache
def library_callers() -> dict:
    """The library's rule callers, parsed once for the tests that read them (a few seconds)."""
    return rule_callers(library_files())


def test_the_judge_alone_decides_conflicts_and_overwrites():
    callers = library_callers()
    for rule, judge in JUDGED.items():
        assert callers.get(rule, set()) <= {judge}, f"{rule} is decided outside the judge"
    assert callers["parallel_conflict"] == callers["overwrite_after_read"] == {JUDGE}
    for rule in ("python_overwrite", "replay_divergence", "custom_gradient_assigns"):
        assert callers[rule] == {JUDGE_ACROSS_LAUNCHES}, f"{rule} has no judge"


def test_no_rule_is_decided_per_backend():
    assert PER_BACKEND == {}
    callers = library_callers()
    for rule in JUDGED:
        assert len(callers.get(rule, ())) <= 1, f"{rule} is decided in {sorted(callers[rule])}"


def test_every_rule_has_one_caller():
    """Each constructor of the catalogue is called from exactly one library module, or only
    by the catalogue itself (the reports `overwrite_after_read` chooses among)."""
    callers = library_callers()
    inside = {node.func.id for node in ast.walk(ast.parse((ROOT / CATALOGUE).read_text()))
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    unused = [rule for rule in RULES if rule not in callers and rule not in inside]
    assert not unused, f"rules no module raises: {unused}"
    assert all(len(callers.get(rule, ())) <= 1 for rule in RULES), \
        {rule: sorted(callers[rule]) for rule in RULES if len(callers.get(rule, ())) > 1}


def test_a_decider_outside_the_judge_is_caught():
    """The finder sees a backend building a conflict or overwrite report itself, either way of
    naming the constructor; the judge's own calls pass."""
    files = {
        JUDGE: "from tinyad.check import rules\nrules.parallel_conflict(kernel='k')\n",
        "interp/accesslog.py": "from tinyad.check import rules\n"
                               "def f():\n    return rules.overwrite_after_read(field='x')\n",
        "tinyad/check/replaycheck.py": "from tinyad.check.rules import read_then_overwrite as r1\n"
                                  "r1(field='x')\n",
    }
    callers = rule_callers(files)
    assert callers["parallel_conflict"] == {JUDGE}
    assert callers["overwrite_after_read"] == {"interp/accesslog.py"}
    assert callers["read_then_overwrite"] == {"tinyad/check/replaycheck.py"}
    # a backend that builds one of the judge's reports (a replay divergence, say) is a second
    # decider: the checks above fail on it
    files["interp/accesslog.py"] += "rules.replay_divergence(kernel='k')\n"
    files[JUDGE_ACROSS_LAUNCHES] = "from tinyad.check import rules\nrules.replay_divergence()\n"
    callers = rule_callers(files)
    assert callers["replay_divergence"] == {"interp/accesslog.py", JUDGE_ACROSS_LAUNCHES}
    assert not callers["replay_divergence"] <= {JUDGED["replay_divergence"]}


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


def test_the_judges_compare_across_launches():
    """One compare for both backends' memories (interp's element summaries, fast mode's
    copies): NaN is NaN, a recomputed sum within rounding is no change, a new value is; a
    store replacing a nonzero gradient is caught, one over a zero gradient or keeping the
    value is not, and the element named is the box's first changed one."""
    from tinyad.check import changes
    from tinyad.check.report import Access
    then = np.array([1.0, np.nan, 3.0, 4.0])
    now = np.array([1.0, np.nan, 3.0 * (1 + 1e-14), 5.0])
    assert changes.changed(then, now).tolist() == [False, False, False, True]
    assert changes.differences(then, now).tolist() == [[3]]
    assert changes.differences(then, then.copy()) is None
    read = Access("read", None, "k", 1, 0, 4.0)
    assert changes.replay_divergence("k", "x", (3,), read, 4.0, None) is None
    assert changes.replay_divergence("k", "x", (3,), read, 5.0, None).report.rule == \
        "Replay divergence"
    store = Access("store", None, "g", 2)
    assert changes.gradient_assigned("x.grad", np.zeros((2, 2)), np.ones((2, 2)), store,
                                     (4,)) is None
    before, after = np.array([[0.0, 2.0], [3.0, 3.0]]), np.array([[1.0, 2.0], [3.0, 7.0]])
    error = changes.gradient_assigned("x.grad", before, after, store, (4,))
    assert error.report.element == (5, 1) and error.report.write.value == 7.0
    one = changes.gradient_assigned("x.grad", np.float64(2.0), np.float64(1.0), store, (3, 1))
    assert one.report.element == (3, 1)
