"""Checking's cost in fast mode, two checkouts side by side: a taped launch (one small kernel
inside `ti.ad.Tape`, forward and backward) with checks off and on, and gravity at N=8
(`fwd_bwd`, 100 steps) with checks on, measured in CPU time (time.process_time, so that a
shared machine's other work counts less), each checkout in turn for --rounds rounds.

    python -m benchmarks.side_by_side OLD_PYTHON NEW_PYTHON [--rounds 5]

Each PYTHON is a checkout's venv interpreter (its editable tinyad is the one measured), e.g.
`/work/wt/ab47/.venv/bin/python .venv/bin/python`. Prints each round's figures and the medians
over rounds. A measurement to read, not a test: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def per_call_cpu_us(fn, calls: int, batches: int = 5) -> float:
    """Median over batches of CPU microseconds per call."""
    times = []
    for _ in range(batches):
        start = time.process_time()
        for _ in range(calls):
            fn()
        times.append((time.process_time() - start) / calls * 1e6)
    return statistics.median(times)


def child(calls: int) -> dict:
    """One checkout's figures (run in that checkout's interpreter: its tinyad, today's
    programs, from this tree's benchmarks package put last on the path)."""
    import tinyad as ti
    sys.path.append(ROOT)
    from benchmarks import gravity, overhead
    result = {}
    for check in ("off", "error"):
        ti.init(mode="fast", check=check, default_fp=ti.f32)
        tape, _ = overhead.taped_launch(ti)
        tape()
        result[f"tape_{check}_us"] = per_call_cpu_us(tape, calls)
    ti.init(mode="fast", check="error", default_fp=ti.f32)
    work = gravity.build(ti, 8, 100)
    reset, fwd_bwd = work.reset, work.fwd_bwd
    reset()
    fwd_bwd()
    times = []
    for _ in range(5):
        reset()
        start = time.process_time()
        fwd_bwd()
        times.append(time.process_time() - start)
    result["gravity8_checked_ms"] = statistics.median(times) * 1e3
    return result


def run_child(python: str, calls: int) -> dict:
    env = dict(os.environ, PYTHONPATH="")
    out = subprocess.run([python, os.path.abspath(__file__), "--child", "--calls", str(calls)],
                         capture_output=True, text=True, env=env, cwd="/", check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pythons", nargs="*", metavar="PYTHON")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        print(json.dumps(child(options.calls)))
        return
    if len(options.pythons) != 2:
        parser.error("give two interpreters: the old checkout's and the new one's")
    rounds = {os.path.abspath(python): [] for python in options.pythons}
    for number in range(options.rounds):
        for python, runs in rounds.items():
            figures = run_child(python, options.calls)
            runs.append(figures)
            print(f"round {number + 1} {python}: "
                  + " ".join(f"{k}={v:.1f}" for k, v in figures.items()), flush=True)
    print("medians over rounds (CPU time; a shared machine's figures):")
    for python, figures in rounds.items():
        print(f"  {python}: " + " ".join(
            f"{key}={statistics.median(f[key] for f in figures):.1f}" for key in figures[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
