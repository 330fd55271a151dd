"""How fast mode shares the machine: one workload run alone, as N copies at the same time, and
beside a busy core (`python -c "while True: pass"`).

    python -m benchmarks --concurrent 2            # wave 128^2, 256 steps, fwd+bwd
    python -m benchmarks.concurrent --copies 2 --rounds 5 --workload wave --env OMP_WAIT_POLICY=active

Each round runs, one after the other: the workload alone, N copies at once, and one copy beside
a busy core; the copies start measuring at one agreed moment (the harness waits for
BENCH_START_AT), so they overlap. The machine may be shared with other people's work, so the
rounds interleave the three situations and the table gives medians over rounds: each copy's
fwd+bwd time (median of --repeats runs in its process) and its ratio to the alone time of the
same rounds. The goal (issue 16): concurrent copies at most 2.5x alone, beside a busy core at
most 2x.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from . import PACKAGE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {"wave": ["--n", "128", "--steps", "256"], "gravity": ["--n", "8", "--steps", "1000"],
         "mass_spring": ["--nx", "10", "--ny", "5", "--steps", "1024"],
         "mpm": ["--n", "8192", "--grid", "128", "--steps", "64"]}
SETTLE_S = 4.0      # from starting the copies to their common start: imports and warm compiles


def start(workload, repeats, env, start_at):
    full_env = dict(os.environ, **env, BENCH_START_AT=repr(start_at),
                    PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", f"{PACKAGE}.{workload}", *SIZES[workload],
                             "--mode", "fast", "--repeats", str(repeats)], cwd=ROOT,
                            env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(proc) -> float:
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"a copy failed: {err.strip().splitlines()[-1:]}")
    return json.loads(out.strip().splitlines()[-1])["fwd_bwd_s"]


def run_copies(workload, copies, repeats, env, busy=False) -> list[float]:
    """fwd+bwd seconds of each of `copies` processes started together (beside a busy loop)."""
    hog = (subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None)
    try:
        start_at = time.time() + SETTLE_S
        procs = [start(workload, repeats, env, start_at) for _ in range(copies)]
        return [finish(p) for p in procs]
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()


def measure(workload, copies, rounds, repeats, env) -> dict:
    samples = {"alone": [], "concurrent": [], "busy": []}
    for r in range(rounds):
        samples["alone"] += run_copies(workload, 1, repeats, env)
        samples["concurrent"] += run_copies(workload, copies, repeats, env)
        samples["busy"] += run_copies(workload, 1, repeats, env, busy=True)
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.4f}" for k, v in samples.items()),
              file=sys.stderr, flush=True)
    return samples


def report(samples, copies) -> str:
    alone = statistics.median(samples["alone"])
    lines = [f"{'situation':<28} {'fwd+bwd s (median)':>18} {'x alone':>8} {'worst x':>8}"]
    for key, label, goal in (("alone", "alone", None),
                             ("concurrent", f"{copies} copies at once (each)", 2.5),
                             ("busy", "beside a busy core", 2.0)):
        values = samples[key]
        med = statistics.median(values)
        lines.append(f"{label:<28} {med:>18.4f} {med / alone:>8.2f} {max(values) / alone:>8.2f}"
                     + (f"   goal <= {goal}" if goal else ""))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.concurrent")
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--workload", default="wave", choices=sorted(SIZES))
    parser.add_argument("--env", action="append", default=[],
                        help="NAME=VALUE set in each copy (to compare settings)")
    args = parser.parse_args(argv)
    env = dict(item.split("=", 1) for item in args.env)
    with tempfile.TemporaryDirectory(prefix="tinyad-concurrent-") as cache:
        env.setdefault("TINYAD_CACHE_DIR", cache)
        run_copies(args.workload, 1, 1, env)          # fill the kernel cache: warm copies
        samples = measure(args.workload, args.copies, args.rounds, args.repeats, env)
    print(f"{args.workload} {' '.join(SIZES[args.workload])}, fast mode, {args.rounds} rounds"
          + (f", {' '.join(args.env)}" if args.env else ""))
    print(report(samples, args.copies))


if __name__ == "__main__":
    main()
