"""Run a planted program (plant.py) and its clean original in interp and fast mode, and judge.

For the planted program, each mode must
  * raise the expected rule error (check="error"), or print the expected warning;
  * raise the same report as the other mode: `err.report.to_dict()` equal (the warnings: the
    same printed text);
  * in check="warn" (what `tinyad check` shows), collect the same violations: as many, each with
    the same first report and the same set of elements.
The clean original must raise and print nothing in either mode (no FD here: gen's fuzzer does
that). The outcome's `kind`: "caught" (all of that), "caught-no-iteration" (all of that but the
iterations the second mode does not know yet: UNKNOWN_IN_FAST), "missed" (a mode raised nothing
or another rule), "disagreed" (both caught it, with different reports or counts),
"false-report" (on the clean original), "broken" (anything else: an internal error, a
generator bug).
"""
from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass, field

import tinyad as ti
from tinyad.check.rules import RuleViolation
from tinyad.runtime import runtime

from . import harness, plant


@dataclass
class Seen:
    """What one run of a program showed."""
    raised: str | None = None          # the rule error's class name
    report: dict | None = None         # its report.to_dict()
    printed: list = field(default_factory=list)   # reports printed (warnings), as text
    problems: list = field(default_factory=list)  # warn mode: [(to_dict, sorted elements)]
    error: str | None = None           # anything else raised


@dataclass
class PlantOutcome:
    kind: str
    rule: str
    reason: str = ""
    keys: tuple = ()                   # where the reports differ ("read.iteration", ...)


def observe(module, mode: str, check: str, seed: int) -> Seen:
    seen = Seen()
    stderr = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stderr(stderr):
        warnings.simplefilter("ignore", ti.NonDifferentiableWarning)
        try:
            inst = harness.Instance(module, mode, "f64", seed, check=check)
            inst.differentiate()
        except RuleViolation as error:
            seen.raised, seen.report = type(error).__name__, error.report.to_dict()
        except Exception as error:  # noqa: BLE001  (judged below: broken)
            seen.error = f"{type(error).__name__}: {str(error).strip()[:160]}"
        if check == "warn":
            seen.problems = [(p.report.to_dict(), sorted(p.elements))
                             for p in runtime.backend.checks.problems()]
    seen.printed = _reports(stderr.getvalue())
    return seen


def _reports(text: str) -> list:
    """The reports printed, each as its text (lines of notes, `[tinyad] ...`, left out)."""
    blocks, current = [], []
    for line in text.splitlines():
        if line.startswith("[tinyad]"):
            continue
        if line and not line.startswith(" ") and current:
            blocks.append("\n".join(current))
            current = []
        if line.strip():
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def differences(a, b, path: str = "") -> list[str]:
    """The paths where two to_dict()s differ: ["read.iteration", "element", ...]."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += differences(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and path != "element":
        return [d for n, (x, y) in enumerate(zip(a, b))
                for d in differences(x, y, f"{path}[{n}]")]
    return [] if a == b else [path or "(report)"]


def check(planted: plant.Planted, modes=("interp", "fast"), seed: int = 0) -> PlantOutcome:
    p = planted.plant
    try:
        clean = harness.load(planted.clean.source)
        bad = harness.load(planted.program.source, like=clean)
    except Exception as error:  # noqa: BLE001
        return PlantOutcome("broken", p.rule, f"source does not import: {error}")
    for mode in modes:
        seen = observe(clean, mode, "error", seed)
        if seen.error:
            return PlantOutcome("broken", p.rule, f"clean, {mode}: {seen.error}")
        if seen.raised or seen.printed:
            what = seen.raised or seen.printed[0].splitlines()[0]
            return PlantOutcome("false-report", p.rule, f"clean, {mode}: {what[:120]}")
    errors = {mode: observe(bad, mode, "error", seed) for mode in modes}
    for mode, seen in errors.items():
        if seen.error:
            return PlantOutcome("broken", p.rule, f"{mode}: {seen.error}")
        if not _caught(seen, p):
            got = seen.raised or (seen.printed[0].splitlines()[0][:80] if seen.printed
                                  else "nothing")
            return PlantOutcome("missed", p.rule, f"{mode}: {got}")
    if len(modes) < 2:
        return PlantOutcome("caught", p.rule)
    a, b = (errors[m] for m in modes)
    keys = tuple(differences(a.report, b.report)) if not p.warning else ()
    if p.warning and a.printed != b.printed:
        keys = ("printed",)
    if keys:
        return _disagreed(p, "reports differ: ", keys, [(a.report, b.report)])
    warned = {mode: observe(bad, mode, "warn", seed) for mode in modes}
    a, b = (sorted(warned[m].problems, key=_bug) for m in modes)
    if [_bug(x) for x in a] != [_bug(x) for x in b]:
        return PlantOutcome("disagreed", p.rule, f"warn mode: {len(a)} violations in "
                            f"{modes[0]} ({_rules(a)}), {len(b)} in {modes[1]} ({_rules(b)})",
                            ("warn.count",))
    for (ra, ea), (rb, eb) in zip(a, b):
        if ea != eb:
            return PlantOutcome("disagreed", p.rule, f"warn mode: elements {_few(ea)} in "
                                f"{modes[0]}, {_few(eb)} in {modes[1]}", ("warn.elements",))
    keys = tuple(f"warn.{k}" for (ra, _), (rb, _) in zip(a, b) for k in differences(ra, rb))
    if keys:
        return _disagreed(p, "warn mode: reports differ: ", keys,
                          [(ra, rb) for (ra, _), (rb, _) in zip(a, b)])
    return PlantOutcome("caught", p.rule)


# Where the second mode's report may say less than interp's: which iteration of another launch
# made a read, fast mode learns by running that launch again, recorded (tinyad/check/readevidence.py),
# except for a kernel that draws random numbers; there it works out the iteration from the
# access's indices (tinyad/check/iterations.py) and names none where they use what only that launch
# knew (a load). A report that differs only there is "caught-no-iteration"; one that names
# another iteration (not None) disagrees.
UNKNOWN_IN_FAST = "iteration"


def _disagreed(p, what: str, keys: tuple, pairs: list) -> PlantOutcome:
    paths = [k.removeprefix("warn.") for k in keys]
    gap = all(k.rsplit(".", 1)[-1] == UNKNOWN_IN_FAST for k in paths) and all(
        _lookup(second, k) is None for _, second in pairs for k in paths)
    kind = "caught-no-iteration" if gap else "disagreed"
    return PlantOutcome(kind, p.rule, what + ", ".join(dict.fromkeys(keys)), keys)


def _lookup(report: dict | None, path: str):
    """report["read"]["iteration"] for "read.iteration" ("earlier[0].iteration" too)."""
    value = report
    for part in path.replace("[", ".").replace("]", "").split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _bug(problem) -> tuple:
    """A warn-mode violation's rule, kernel and lines, as both modes should group it."""
    report = problem[0]
    line = (lambda a: None if a is None else a["line"])
    return (report["rule"], report["kernel"] or "", line(report["write"]) or 0,
            line(report["read"]) or 0)


def _rules(problems) -> str:
    return "; ".join(f"{r['rule']} in {r['kernel']}" for r, _ in problems)


def _caught(seen: Seen, p: plant.Plant) -> bool:
    if p.warning:
        return seen.raised is None and any(text.startswith(p.expected) for text in seen.printed)
    return seen.raised == p.expected


def _few(elements: list) -> str:
    return f"{len(elements)} ({', '.join(elements[:3])}{', ...' if len(elements) > 3 else ''})"


def check_seeded(seed: int, rule: str, small: bool, modes=("interp", "fast")):
    """Plant `rule` into program `seed` and check it: -> (Planted, PlantOutcome)."""
    planted = plant.planted(seed, rule, small)
    return planted, check(planted, modes, seed)


def check_job(job: tuple, small: bool):
    """(seed, rule) -> (seed, Planted, PlantOutcome): what the CLI's worker processes run."""
    seed, rule = job
    return (seed, *check_seeded(seed, rule, small))
