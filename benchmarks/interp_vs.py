"""`python -m benchmarks --interp-vs REV`: interp mode now against interp mode at an earlier
commit, side by side in one run, and what the rule checks cost in interp mode now.

REV's tinyad is unpacked from git (`git archive`, into a temporary directory, removed at the
end: the repository's worktrees are left alone) and runs today's workload modules and harness,
so both sides run the same programs, timed the same way, one process per measurement, the
old and the new one after the other for each workload and check setting (the machine's load
falls on both alike). Each workload runs at its interp size (`Size.interp` in
benchmarks/__main__.py).

Times are CPU seconds (`time.process_time`; interp mode runs on one thread), medians of the
repeats: on a machine shared with other jobs they are what the load inflates least.

Two tables:
  * speed-up: fwd and fwd+bwd seconds then and now, checks off and on ("error");
  * checks' cost now: checked over unchecked, for fwd, fwd+bwd, the peak memory the workload
    allocates (tracemalloc from its build on: fields, the checker's summaries, temporaries;
    a separate run, see benchmarks/harness.py) and the process's peak resident memory.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from . import tables
from .process import run_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKS = ("off", "error")


def unpack(rev: str, into: str) -> str:
    """REV's source tree under `into`; -> a directory to run from, where `tinyad` is REV's
    and `benchmarks` today's. interp/ and compile/ are linked where the install puts them
    (tinyad.interp, tinyad.compile)."""
    tree = os.path.join(into, "tree")
    os.makedirs(tree)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    for package in ("interp", "compile"):
        os.symlink(os.path.join(tree, package), os.path.join(tree, "tinyad", package))
    run_dir = os.path.join(into, "run")
    os.makedirs(run_dir)
    os.symlink(os.path.join(tree, "tinyad"), os.path.join(run_dir, "tinyad"))
    os.symlink(os.path.join(ROOT, "benchmarks"), os.path.join(run_dir, "benchmarks"))
    return run_dir


def measure(run_dir: str, module: str, args: list, timeout=3600) -> dict:
    """One process running `module` from `run_dir` (its first sys.path entry): its JSON line,
    or {"error": ...}."""
    return run_module(module, args, run_dir, timeout=timeout)


def tinyad_location(run_dir: str) -> str:
    """Where `import tinyad.interp` resolves from run_dir (a check that REV's runs)."""
    return subprocess.run(
        [sys.executable, "-c", "import tinyad.interp as m; print(m.__file__)"],
        capture_output=True, text=True, cwd=run_dir,
        env=dict(os.environ, PYTHONPATH=run_dir)).stdout.strip()


def compare(rev: str | None, workloads: dict, names: list, repeats: int, describe) -> str:
    """Run everything; -> the tables as text (rev None: only what the checks cost now)."""
    rows = []       # (workload, label, check, then, now, memory)
    with tempfile.TemporaryDirectory(prefix="tinyad-interp-vs-") as tmp:
        new_dir = os.path.join(tmp, "new")          # today's tree, run the same way
        os.makedirs(new_dir)
        for package in ("tinyad", "benchmarks"):
            os.symlink(os.path.join(ROOT, package), os.path.join(new_dir, package))
        old_dir = unpack(rev, os.path.join(tmp, "old")) if rev else None
        where = tinyad_location(old_dir) if rev else ""
        if rev and not where.startswith(old_dir):
            raise SystemExit(f"{rev}'s tinyad did not load from its tree (got {where!r})")
        for name in names:
            for size in workloads[name]:
                if not size.interp:
                    continue
                module = f"benchmarks.{name}"
                for check in CHECKS:
                    args = [*size.interp, "--mode", "interp", "--check", check,
                            "--repeats", str(repeats)]
                    then = measure(old_dir, module, args) if rev else {}
                    now = measure(new_dir, module, args)
                    memory = measure(new_dir, module, [*args, "--memory"])
                    rows.append((name, describe(size.interp), check, then, now, memory))
                print(f"{name}: done", file=sys.stderr)
    return (speedup_table(rev, rows) + "\n\n" if rev else "") + cost_table(rows)


def _ratio(a, b):
    return f"{a / b:.1f}x" if a and b else "-"


def speedup_table(rev, rows, width=None) -> str:
    head = (f"{'workload':<12} {'size':<28} {'check':<6} ",
            f"{'fwd then':>9} {'fwd now':>9} {'speed-up':>8} {'f+b then':>9} {'f+b now':>9} "
            f"{'speed-up':>8}")
    lines = []
    for name, label, check, then, now, _ in rows:
        key = f"{name:<12} {label:<28} {check:<6} "
        bad = [r["error"] for r in (then, now) if "error" in r]
        if bad:
            lines.append((key, f"error: {bad[0]}"))
            continue
        lines.append((key, f"{then['forward_cpu_s']:>9.4f} {now['forward_cpu_s']:>9.4f} "
                           f"{_ratio(then['forward_cpu_s'], now['forward_cpu_s']):>8} "
                           f"{then['fwd_bwd_cpu_s']:>9.4f} {now['fwd_bwd_cpu_s']:>9.4f} "
                           f"{_ratio(then['fwd_bwd_cpu_s'], now['fwd_bwd_cpu_s']):>8}"))
    return "\n".join(tables.fit(head, lines, width, title=f"interp mode, now against {rev} "
                                "(CPU seconds, medians; one process each, side by side)"))


def cost_table(rows, width=None) -> str:
    head = (f"{'workload':<12} {'size':<28} ",
            f"{'fwd':>6} {'fwd+bwd':>8} {'traced MB':>15} {'ratio':>6} {'rss MB':>13} "
            f"{'ratio':>6}")
    lines = []
    by = {(name, label, check): (now, memory) for name, label, check, _, now, memory in rows}
    for name, label in dict.fromkeys((r[0], r[1]) for r in rows):
        (off, off_mem), (on, on_mem) = by[name, label, "off"], by[name, label, "error"]
        key = f"{name:<12} {label:<28} "
        bad = [r["error"] for r in (off, on, off_mem, on_mem) if "error" in r]
        if bad:
            lines.append((key, f"error: {bad[0]}"))
            continue
        lines.append((key,
            f"{on['forward_cpu_s'] / off['forward_cpu_s']:>6.2f} "
            f"{on['fwd_bwd_cpu_s'] / off['fwd_bwd_cpu_s']:>8.2f} "
            f"{off_mem['traced_peak_mb']:>7.2f}/{on_mem['traced_peak_mb']:<7.2f} "
            f"{on_mem['traced_peak_mb'] / off_mem['traced_peak_mb']:>6.2f} "
            f"{off['peak_rss_mb']:>6.0f}/{on['peak_rss_mb']:<6.0f} "
            f"{on['peak_rss_mb'] / off['peak_rss_mb']:>6.2f}"))
    return "\n".join(tables.fit(head, lines, width, title=(
        "what the checks cost in interp mode now: checked over unchecked, CPU seconds and "
        "memory (traced MB: peak allocated by the workload, off / on)")))
