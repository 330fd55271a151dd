"""`python -m benchmarks`: the four reference workloads (benchmarks/README.md), side by side.

For each workload and size: interp mode (at a small size: it is a tree-walking interpreter),
fast mode with a cold kernel cache and again with that cache warm, and the same two for each
peer that is importable (`pip install -e ".[bench]"`): Taichi 1.7.4 (its offline cache), Warp
and JAX on the CPU (their own caches; benchmarks/peers/). The systems alternate: every cold run,
then every warm run (`--rounds N`: N times, the median shown), so that all of them see the same
machine. Each measurement runs in its own process (benchmarks/harness.py). Times are medians
of `--repeats` runs; "compile s" is the first calls minus the steady state (tracing, compiling
or loading caches), "start s" the process's import and init time, "tinyad/x" tinyad's fast
fwd+bwd (warm) over this row's (below 1: tinyad is faster; on "fast captured", the ti.capture'd
version's over the uncaptured). "fast checked" is fast mode (warm)
with the autodiff rule checks on (`check="error"`, tinyad's default; the other fast rows run
with `check="off"`), and "/unchecked" its fwd+bwd over the unchecked warm row's; "fast
captured" and "fast capt. chk" run the workload's functions under `ti.capture`, unchecked and
checked (a checked call is replayed where its checks decided nothing from values: see
docs/capture.md; its "/unchecked" is over the captured unchecked row's). "check" is
the largest relative difference of the loss and gradients: on tinyad's rows from Taichi
1.7.4's f32 numbers for the same programs (when that size has numbers), on a peer's rows from
tinyad's fast mode (warm). A table of the ratios follows (benchmarks/ratios.py), and `--plot`
draws them.

    python -m benchmarks                       # every workload at its reference sizes
    python -m benchmarks --only wave,mpm       # some of them
    python -m benchmarks --quick               # small sizes, a smoke test
    python -m benchmarks --json out.json       # also the raw results
    python -m benchmarks --plot out.png        # a bar chart of the ratios (the plot extra)
    python -m benchmarks --peers warp,jax      # only these peers (none: tinyad alone)
    python -m benchmarks --concurrent 2        # 2 copies of wave at once vs alone
                                               # (benchmarks/concurrent.py)
    python -m benchmarks --interp-vs 9355eb9^1 # interp mode now vs that commit, and the
                                               # checks' cost in interp mode (time, memory)
    python -m benchmarks --interp-cost         # only the latter (benchmarks/interp_vs.py)
    python -m benchmarks --fast-vs 8e13fa6     # fast mode now vs that commit, unchecked and
                                               # checked, and captured now (benchmarks/fast_vs.py)
    python -m benchmarks --arch cuda           # on a GPU, beside Taichi CUDA and JAX
                                               # (benchmarks/gpu.py)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field

from . import PACKAGE, ratios, tables
from .process import run_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Size:
    label: str
    args: list                          # the module's command-line size arguments
    interp: list | None = None          # smaller arguments for interp mode, None: skip it
    reference: dict = field(default_factory=dict)    # Taichi 1.7.4's loss and gradients


# Taichi 1.7.4's numbers for these programs (f32); f32 and f64 agree to 1e-3 on losses
# and 5e-3 on gradients, so a difference under that is rounding.
WORKLOADS = {
    "gravity": [
        Size("N=8, 1000 steps", ["--n", "8", "--steps", "1000"], ["--n", "8", "--steps", "20"],
             {"loss": -407.084, "x.grad[0][0]": -93.04695, "x.grad[0][1]": 88.58924}),
        Size("N=1024, 100 steps", ["--n", "1024", "--steps", "100"]),
    ],
    "mass_spring": [
        Size("10x5, 1024 steps", ["--nx", "10", "--ny", "5", "--steps", "1024"],
             ["--nx", "10", "--ny", "5", "--steps", "256"],
             {"loss": 0.2888518, "amp.grad[0]": 0.0042246, "amp.grad[78]": 0.0235145}),
    ],
    "wave": [
        Size("128^2, 256 steps", ["--n", "128", "--steps", "256"], ["--n", "32", "--steps", "32"],
             {"loss": 0.0063520847, "init.grad[64,64]": 6.65397e-05}),
        Size("256^2, 256 steps", ["--n", "256", "--steps", "256"]),
    ],
    "mpm": [
        Size("8192 p, 128^2, 64 steps", ["--n", "8192", "--grid", "128", "--steps", "64"],
             ["--n", "256", "--grid", "32", "--steps", "4"],
             {"loss": 0.1245315, "init_v.grad[0]": -0.015204, "init_v.grad[1]": -0.015282,
              "E.grad": -3.4771e-05}),
    ],
}

QUICK = {
    "gravity": [Size("N=8, 100 steps", ["--n", "8", "--steps", "100"], ["--n", "8", "--steps", "5"])],
    "mass_spring": [Size("4x3, 160 steps", ["--nx", "4", "--ny", "3", "--steps", "160"],
                         ["--nx", "4", "--ny", "3", "--steps", "40"])],
    "wave": [Size("32^2, 32 steps", ["--n", "32", "--steps", "32"], ["--n", "16", "--steps", "8"])],
    "mpm": [Size("512 p, 32^2, 8 steps", ["--n", "512", "--grid", "32", "--steps", "8"],
                 ["--n", "64", "--grid", "16", "--steps", "2"])],
}


def run(module, args, env=None, timeout=1800):
    """One measurement in a fresh process: its JSON line, or {"error": the last stderr line}."""
    return run_module(module, args, ROOT, env, timeout)


def describe(args):
    """["--n", "8", "--steps", "20"] -> "n=8 steps=20"."""
    return " ".join(f"{k.lstrip('-')}={v}" for k, v in zip(args[::2], args[1::2]))


def peer_command(peer, name):
    """(module, flags) that run workload `name` under `peer`."""
    if peer == "taichi":
        return f"{PACKAGE}.{name}", ["--taichi"]
    return f"{PACKAGE}.peers.{peer}_{name}", []


def median_run(results):
    """Of one system's warm runs, the one with the median fwd+bwd (an error if all failed)."""
    ok = sorted((r for r in results if "error" not in r), key=lambda r: r["fwd_bwd_s"])
    return ok[(len(ok) - 1) // 2] if ok else results[-1]


def measure_workload(name, sizes, repeats, cache, peers, rounds=1):
    """Rows (workload, size label, mode, result, reference) for one workload."""
    module, rows = f"{PACKAGE}.{name}", []
    for k, size in enumerate(sizes):
        common = ["--repeats", str(repeats)]
        if size.interp:
            label = describe(size.interp) if size.interp != size.args else size.label
            rows.append((name, label, "interp",
                         run(module, [*size.interp, *common, "--mode", "interp"]),
                         size.reference if size.interp == size.args else {}))
        caches = os.path.join(cache, f"{name}-{k}")       # each size starts from empty caches
        env = {"TINYAD_CACHE_DIR": os.path.join(caches, "tinyad"),
               "TI_OFFLINE_CACHE_FILE_PATH": os.path.join(caches, "taichi"),
               "WARP_CACHE_PATH": os.path.join(caches, "warp"),
               "JAX_COMPILATION_CACHE_DIR": os.path.join(caches, "jax")}
        systems = [("fast", module, ["--mode", "fast"])]
        systems += [(peer, *peer_command(peer, name)) for peer in peers]
        measured, warm = {}, {system: [] for system, *_ in systems}
        # alternating: each system's cold run, then rounds of each system's warm run
        for system, system_module, flags in systems:
            measured[system, "cold"] = run(system_module, [*size.args, *common, *flags], env)
        for _ in range(rounds):
            for system, system_module, flags in systems:
                warm[system].append(run(system_module, [*size.args, *common, *flags], env))
        for system in warm:
            measured[system, "warm"] = median_run(warm[system])
        for system, *_ in systems:                # shown system by system
            for state in ("cold", "warm"):
                rows.append((name, size.label, f"{system} {state}", measured[system, state],
                             size.reference if system in ("fast", "taichi") else {}))
        rows.append((name, size.label, "fast checked",
                     run(module, [*size.args, *common, "--mode", "fast", "--check", "error"], env),
                     size.reference))
        for mode, check in (("fast captured", "off"), ("fast capt. chk", "error")):
            rows.append((name, size.label, mode,      # a user's ti.capture'd version
                         run(module, [*size.args, *common, "--mode", "fast", "--capture",
                                      "--check", check], env), size.reference))
    return rows


def deviation(result, reference):
    """The largest relative difference from Taichi's numbers, or None."""
    if not reference:
        return None
    got = {"loss": result["loss"], **result.get("grads", {})}
    worst = 0.0
    for key, want in reference.items():
        if key not in got:
            return float("inf")
        worst = max(worst, abs(got[key] - want) / max(abs(want), 1e-30))
    return worst


def table(rows, width=None):
    head = (f"{'workload':<12} {'size':<24} {'mode':<14} ",
            f"{'start s':>7} {'compile s':>9} {'fwd s':>8} {'fwd+bwd s':>9} {'tinyad/x':>8} "
            f"{'/unchecked':>10} {'loss':>11} {'check':>8}")
    lines = []
    fast = {(w, s): r for w, s, m, r, _ in rows if m == "fast warm" and "error" not in r}
    captured = {(w, s): r for w, s, m, r, _ in rows if m == "fast captured" and "error" not in r}
    for workload, size, mode, r, reference in rows:
        key = f"{workload:<12} {size:<24} {mode:<14} "
        if "error" in r:
            lines.append((key, f"error: {r['error']}"))
            continue
        tinyad = fast.get((workload, size))
        peer = mode.split()[0] in ratios.PEERS
        ratio = (f"{tinyad['fwd_bwd_s'] / r['fwd_bwd_s']:.2f}"
                 if tinyad and peer and mode.endswith("warm") else "")
        unchecked = {"fast checked": tinyad, "fast capt. chk": captured.get((workload, size))}
        base = unchecked.get(mode)
        cost = f"{r['fwd_bwd_s'] / base['fwd_bwd_s']:.2f}" if base else ""
        if mode == "fast captured" and tinyad:    # captured over uncaptured, in the ratio column
            ratio = f"{r['fwd_bwd_s'] / tinyad['fwd_bwd_s']:.2f}"
        if peer and mode.split()[0] != "taichi" and tinyad:
            reference = {"loss": tinyad["loss"], **tinyad["grads"]}   # the same as tinyad's?
        dev = deviation(r, reference)
        check = "" if dev is None else f"{dev:.1e}"
        lines.append((key, f"{r['import_s']:>7.2f} {r['compile_s']:>9.2f} "
                           f"{r['forward_s']:>8.4f} {r['fwd_bwd_s']:>9.4f} {ratio:>8} "
                           f"{cost:>10} {r['loss']:>11.7g} {check:>8}"))
    return "\n".join(tables.fit(head, lines, width))


def overhead_line(result):
    if "error" in result:
        return f"launch overhead: error: {result['error']}"
    return "launch overhead per call (us): " + ", ".join(
        f"{k[:-3]} {v:.1f}" for k, v in result.items() if k.endswith("_us"))


def main(argv=None):
    # `tinyad bench` runs this module and says so, for the usage line to name it
    parser = argparse.ArgumentParser(prog=os.environ.get("TINYAD_BENCH_PROG",
                                                         "python -m benchmarks"))
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--only", help="comma-separated workloads: " + ", ".join(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1,
                        help="warm runs of each system, alternating (the median one is shown)")
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--no-taichi", action="store_true", help="no Taichi rows")
    parser.add_argument("--peers", help="comma-separated: " + ", ".join(ratios.PEERS)
                        + " (default: every importable one), or none")
    parser.add_argument("--plot", metavar="PATH",
                        help="a bar chart of the ratios into PATH (.png, or a directory)")
    parser.add_argument("--concurrent", type=int, metavar="N",
                        help="instead: N copies of one workload (wave, or --only) at once, "
                             "against one alone and one beside a busy core")
    parser.add_argument("--interp-vs", metavar="REV",
                        help="instead: interp mode against commit REV, side by side, and "
                             "what the checks cost in interp mode (benchmarks/interp_vs.py)")
    parser.add_argument("--fast-vs", metavar="REV",
                        help="instead: fast mode against commit REV, side by side, unchecked "
                             "and checked, with today's captured rows (benchmarks/fast_vs.py)")
    parser.add_argument("--interp-cost", action="store_true",
                        help="instead: only what the checks cost in interp mode")
    parser.add_argument("--arch", default="cpu", choices=("cpu", "cuda"),
                        help="cuda: the workloads on the GPU beside Taichi CUDA and JAX, values "
                             "checked against the CPU (benchmarks/gpu.py)")
    args = parser.parse_args(argv)
    if args.arch == "cuda":
        from . import gpu  # noqa: PLC0415
        return gpu.main(args, run)
    if args.interp_vs or args.interp_cost:
        from . import interp_vs  # noqa: PLC0415
        suite = QUICK if args.quick else WORKLOADS
        names = args.only.split(",") if args.only else list(suite)
        print(interp_vs.compare(args.interp_vs, suite, names, args.repeats, describe))
        return None
    if args.fast_vs:
        from . import fast_vs  # noqa: PLC0415
        suite = QUICK if args.quick else WORKLOADS
        names = args.only.split(",") if args.only else list(suite)
        print(fast_vs.compare(args.fast_vs, suite, names, args.repeats, args.rounds, describe))
        return None
    if args.concurrent:
        from . import concurrent  # noqa: PLC0415
        return concurrent.main(["--copies", str(args.concurrent),
                                "--workload", args.only or "wave"])
    suite = QUICK if args.quick else WORKLOADS
    names = args.only.split(",") if args.only else list(suite)
    unknown = [n for n in names if n not in suite]
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}; choose from {', '.join(suite)}")
    wanted = ratios.PEERS if args.peers is None else [
        p for p in args.peers.split(",") if p and p != "none"]
    unknown = [p for p in wanted if p not in ratios.PEERS]
    if unknown:
        parser.error(f"unknown peer {', '.join(unknown)}; choose from {', '.join(ratios.PEERS)}")
    missing = [p for p in wanted if importlib.util.find_spec(p) is None]
    peers = [p for p in wanted if p not in missing and not (p == "taichi" and args.no_taichi)]
    taichi = "taichi" in peers
    rows = []
    with tempfile.TemporaryDirectory(prefix="tinyad-bench-cache-") as cache:
        for name in names:
            rows += measure_workload(name, suite[name], args.repeats, cache, peers, args.rounds)
            print(f"{name}: done", file=sys.stderr)
        overhead = run(f"{PACKAGE}.overhead",
                       ["--calls", "2000" if args.quick else "20000"]
                       + (["--taichi"] if taichi else []),
                       {"TINYAD_CACHE_DIR": os.path.join(cache, "overhead")})
    print(table(rows))
    print()
    print(overhead_line(overhead))
    if peers:
        print()
        print(ratios.ratio_table(rows, peers))
    if missing:
        print(f"({', '.join(missing)} not importable: no rows for "
              f"{'it' if len(missing) == 1 else 'them'}; `pip install -e \".[bench]\"` adds "
              f"Taichi 1.7.4, Warp and JAX)")
    if args.plot:
        print(ratios.plot(rows, peers, args.plot))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": [dict(r, workload=w, size=s, run=m) for w, s, m, r, _ in rows],
                       "overhead": overhead}, f, indent=1)


if __name__ == "__main__":
    main()
