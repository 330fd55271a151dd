"""`python -m benchmarks`: the reference workloads, interp vs fast (cold and warm cache) vs Taichi.

Each measurement runs in its own process (a cold start is a fresh process with an empty kernel
cache; a warm start is a fresh process reusing that cache). Times are medians of `--repeats`
runs; "first calls" is the wall time of the first forward + forward/backward step (tracing,
compiling or loading the cache), "start" the process's import and init time.

    python -m benchmarks                 # gravity N=8 x 1000 steps and N=1024 x 100 steps
    python -m benchmarks --quick         # smaller sizes, for a smoke test
    python -m benchmarks --json out.json
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(module, args, env=None, timeout=1800):
    full_env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          env=full_env, cwd=ROOT, timeout=timeout)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def gravity_rows(sizes, repeats, cache, taichi):
    rows = []
    for n, steps, interp_steps in sizes:
        common = ["--n", str(n), "--repeats", str(repeats)]
        if interp_steps:
            rows.append(("gravity", n, interp_steps, "interp",
                         run("benchmarks.gravity", [*common, "--steps", str(interp_steps),
                                                    "--mode", "interp"])))
        env = {"TINYAD_CACHE_DIR": cache}
        for label in ("fast cold", "fast warm"):
            rows.append(("gravity", n, steps, label,
                         run("benchmarks.gravity", [*common, "--steps", str(steps)], env)))
        if taichi:
            rows.append(("gravity", n, steps, "taichi 1.7",
                         run("benchmarks.gravity", [*common, "--steps", str(steps), "--taichi"])))
    return rows


def table(rows):
    head = (f"{'workload':<9} {'N':>5} {'steps':>6} {'mode':<11} {'start s':>8} "
            f"{'first s':>8} {'fwd s':>9} {'fwd+bwd s':>10} {'U(x0)':>12} {'dU/dx[0]':>22}")
    lines = [head, "-" * len(head)]
    for name, n, steps, mode, r in rows:
        if "error" in r:
            lines.append(f"{name:<9} {n:>5} {steps:>6} {mode:<11} error: {r['error']}")
            continue
        grad = "[" + ", ".join(f"{g:.5g}" for g in r["grad0"]) + "]"
        lines.append(f"{name:<9} {n:>5} {steps:>6} {mode:<11} {r['import_s']:>8.2f} "
                     f"{r['first_calls_s']:>8.2f} {r['forward_s']:>9.4f} {r['fwd_bwd_s']:>10.4f} "
                     f"{r['U0']:>12.6g} {grad:>22}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--no-taichi", action="store_true")
    args = parser.parse_args(argv)
    taichi = not args.no_taichi and importlib.util.find_spec("taichi") is not None
    sizes = [(8, 100, 10)] if args.quick else [(8, 1000, 20), (1024, 100, 0)]
    with tempfile.TemporaryDirectory(prefix="tinyad-bench-cache-") as cache:
        rows = gravity_rows(sizes, args.repeats, cache, taichi)
        overhead = run("benchmarks.overhead", ["--calls", "2000" if args.quick else "20000"],
                       {"TINYAD_CACHE_DIR": cache})
    print(table(rows))
    print()
    if "error" in overhead:
        print(f"launch overhead: error: {overhead['error']}")
    else:
        print("launch overhead per call (us): " + ", ".join(
            f"{k} {v:.1f}" for k, v in overhead.items() if k.endswith("_us")))
    if not taichi:
        print("(taichi is not installed: no Taichi column)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gravity": [dict(zip(("workload", "n", "steps", "mode"), r[:4]), **r[4])
                                   for r in rows], "overhead": overhead}, f, indent=1)


if __name__ == "__main__":
    main()
