"""`python -m benchmarks --fast-vs REV`: fast mode now against fast mode at an earlier commit,
side by side in one run, unchecked and checked, and the captured rows now.

The old side is REV's tinyad unpacked from git as `--interp-vs` does (benchmarks/interp_vs.py):
both sides run today's workload modules and harness, one process per measurement, the old and
the new one after the other for each workload, size and check setting, `--rounds` times (the
median shown), so that the machine's load falls on both alike. The captured rows
(`--capture`, tinyad/capture.py) run on today's side only: REV may predate `ti.capture`.

Times are the harness's medians of CPU seconds (`time.process_time`): on a machine shared with
other jobs they are what the load inflates least. A workload whose kernels use threads counts
every thread's time, on both sides alike.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile

from . import tables
from .interp_vs import ROOT, measure, tinyad_location, unpack

CHECKS = ("off", "error")


def compare(rev: str, workloads: dict, names: list, repeats: int, rounds: int,
            describe) -> str:
    """Run everything; -> the table as text."""
    rows = []       # (workload, label, check, then, now, captured now)
    with tempfile.TemporaryDirectory(prefix="tinyad-fast-vs-") as tmp:
        new_dir = os.path.join(tmp, "new")          # today's tree, run the same way
        os.makedirs(new_dir)
        for package in ("tinyad", "benchmarks"):
            os.symlink(os.path.join(ROOT, package), os.path.join(new_dir, package))
        old_dir = unpack(rev, os.path.join(tmp, "old"))
        where = tinyad_location(old_dir)
        if not where.startswith(old_dir):
            raise SystemExit(f"{rev}'s tinyad did not load from its tree (got {where!r})")
        for name in names:
            module = f"benchmarks.{name}"
            for size in workloads[name]:
                for check in CHECKS:
                    args = [*size.args, "--mode", "fast", "--check", check,
                            "--repeats", str(repeats)]
                    then, now, captured = [], [], []
                    for _ in range(rounds):      # alternating, so both see the same machine
                        then.append(measure(old_dir, module, args))
                        now.append(measure(new_dir, module, args))
                        captured.append(measure(new_dir, module, [*args, "--capture"]))
                    rows.append((name, describe(size.args), check,
                                 *(_middle(runs) for runs in (then, now, captured))))
                print(f"{name}: done", file=sys.stderr)
    return table(rev, rows)


def _middle(runs: list) -> dict:
    """The run whose fwd+bwd CPU time is the median of the rounds' (or the first error)."""
    bad = [r for r in runs if "error" in r]
    if bad:
        return bad[0]
    middle = statistics.median_low([r["fwd_bwd_cpu_s"] for r in runs])
    return next(r for r in runs if r["fwd_bwd_cpu_s"] == middle)


def _ratio(new: float, old: float) -> str:
    return f"{new / old:.2f}" if new and old else "-"


def table(rev: str, rows: list, width=None) -> str:
    head = (f"{'workload':<12} {'size':<26} {'check':<6} ",
            f"{'f+b then':>9} {'f+b now':>9} {'now/then':>8} {'captured':>9} "
            f"{'capt/then':>9} {'fwd now/then':>12}")
    lines = []
    for name, label, check, then, now, captured in rows:
        key = f"{name:<12} {label:<26} {check:<6} "
        bad = [r["error"] for r in (then, now) if "error" in r]
        if bad:
            lines.append((key, f"error: {bad[0]}"))
            continue
        old, new = then["fwd_bwd_cpu_s"], now["fwd_bwd_cpu_s"]
        capt = captured.get("fwd_bwd_cpu_s")
        lines.append((key, f"{old:>9.4f} {new:>9.4f} {_ratio(new, old):>8} "
                           f"{capt if capt is not None else float('nan'):>9.4f} "
                           f"{_ratio(capt, old):>9} "
                           f"{_ratio(now['forward_cpu_s'], then['forward_cpu_s']):>12}"))
    return "\n".join(tables.fit(head, lines, width, title=(
        f"fast mode, now against {rev} (fwd+bwd CPU seconds, medians; one process each, "
        "side by side; below 1: now is faster; captured: today's ti.capture'd run)")))
