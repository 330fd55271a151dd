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

import numpy as np


def per_call_cpu_us(fn, calls: int, batches: int = 5) -> float:
    """Median over batches of CPU microseconds per call."""
    times = []
    for _ in range(batches):
        start = time.process_time()
        for _ in range(calls):
            fn()
        times.append((time.process_time() - start) / calls * 1e6)
    return statistics.median(times)


def taped_launch(ti):
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def small():
        for i in range(4):
            loss[None] += x[i] * x[i]

    def tape():
        with ti.ad.Tape(loss=loss):
            small()
    return tape


def gravity(ti, n: int, steps: int, dt: float = 1e-5):
    """benchmarks/gravity.py's fwd_bwd, written here so that both checkouts run one program."""
    x = ti.Vector.field(2, dtype=ti.f32, shape=n, needs_grad=True)
    v = ti.Vector.field(2, dtype=ti.f32, shape=n)
    U = ti.field(dtype=ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def compute_U():
        for i, j in ti.ndrange(n, n):
            r = x[i] - x[j]
            U[None] += -1 / r.norm(1e-3)

    @ti.kernel
    def advance():
        for i in x:
            v[i] -= dt * x.grad[i]
            x[i] += dt * v[i]

    def reset():
        x.from_numpy(np.random.default_rng(0).random((n, 2)).astype(np.float32))
        v.fill(0)

    def fwd_bwd():
        for _ in range(steps):
            with ti.ad.Tape(loss=U):
                compute_U()
            advance()
    return reset, fwd_bwd


def child(calls: int) -> dict:
    """One checkout's figures (run in that checkout's interpreter)."""
    import tinyad as ti
    result = {}
    for check in ("off", "error"):
        ti.init(mode="fast", check=check, default_fp=ti.f32)
        tape = taped_launch(ti)
        tape()
        result[f"tape_{check}_us"] = per_call_cpu_us(tape, calls)
    ti.init(mode="fast", check="error", default_fp=ti.f32)
    reset, fwd_bwd = gravity(ti, 8, 100)
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
