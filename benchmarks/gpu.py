"""`python -m benchmarks --arch cuda`: the workloads on a GPU, beside Taichi's CUDA backend and
JAX on the GPU, with every value checked against tinyad on the CPU.

For each size: tinyad fast mode on CUDA in a process that starts from an empty kernel cache
(its first calls are the cold compile, then the steady state), the same again with the rule
checks on (the cache now warm), and Taichi 1.7.4 (`arch=ti.cuda`) and JAX on the GPU where
importable (each from its own empty cache). Tinyad fast mode on the CPU runs the same size
meanwhile, on the host's cores, for the values: "vs cpu" is the largest relative difference of a
row's loss and gradients from that run's. "arch" says where a row ran: without a usable GPU,
tinyad says why and runs on the CPU, and the table shows it. Sized to finish within about
4 minutes on an H200; `--quick` runs small sizes (a smoke test, GPU or not).
"""
from __future__ import annotations

import importlib.util
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

from . import PACKAGE, tables

SIZES = {
    "wave": [("256^2, 256 steps", ["--n", "256", "--steps", "256"]),
             ("1024^2, 256 steps", ["--n", "1024", "--steps", "256"])],
    "mpm": [("8192 p, 128^2, 64 steps", ["--n", "8192", "--grid", "128", "--steps", "64"]),
            ("65536 p, 128^2, 64 steps", ["--n", "65536", "--grid", "128", "--steps", "64"])],
    "gravity": [("N=1024, 20 Tapes", ["--n", "1024", "--steps", "20"]),
                ("N=8192, 5 Tapes", ["--n", "8192", "--steps", "5"])],
    "mass_spring": [("10x5, 1024 steps", ["--nx", "10", "--ny", "5", "--steps", "1024"])],
}
QUICK = {
    "wave": [("32^2, 16 steps", ["--n", "32", "--steps", "16"])],
    "mpm": [("256 p, 32^2, 4 steps", ["--n", "256", "--grid", "32", "--steps", "4"])],
    "gravity": [("N=64, 2 Tapes", ["--n", "64", "--steps", "2"])],
    "mass_spring": [("4x3, 64 steps", ["--nx", "4", "--ny", "3", "--steps", "64"])],
}
PEERS = ("taichi", "jax")
CPU_THREADS = "8"     # the CPU reference runs beside the GPU rows: leave them cores


def systems(name, peers):
    """(row label, module, flags, fresh cache) for each system measured on the GPU."""
    rows = [("tinyad", f"{PACKAGE}.{name}", ["--mode", "fast"], True),
            ("tinyad checked", f"{PACKAGE}.{name}", ["--mode", "fast", "--check", "error"],
             False)]
    if "taichi" in peers:
        rows.append(("taichi", f"{PACKAGE}.{name}", ["--taichi"], True))
    if "jax" in peers:
        rows.append(("jax", f"{PACKAGE}.peers.jax_{name}", [], True))
    return rows


def deviation(result, reference):
    """The largest relative difference of the loss and gradients, or None without both."""
    if "error" in result or not reference or "error" in reference:
        return None
    want = {"loss": reference["loss"], **reference.get("grads", {})}
    got = {"loss": result["loss"], **result.get("grads", {})}
    if set(got) != set(want):
        return float("inf")
    return max(abs(got[k] - want[k]) / max(abs(want[k]), 1e-30) for k in want)


def measure(suite, names, peers, repeats, run):
    """Rows (workload, size, system, result, the CPU reference's result)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="tinyad-gpu-bench-") as cache, \
            ThreadPoolExecutor(max_workers=1) as cpu_pool:
        references = {}
        for name in names:           # queued first: they run while the GPU rows do
            for k, (label, args) in enumerate(suite[name]):
                env = {"TINYAD_CACHE_DIR": os.path.join(cache, f"cpu-{name}-{k}"),
                       "NUMBA_NUM_THREADS": CPU_THREADS}
                references[name, label] = cpu_pool.submit(
                    run, f"{PACKAGE}.{name}", [*args, "--mode", "fast", "--repeats", "1"], env)
        for name in names:
            for k, (label, args) in enumerate(suite[name]):
                gpu_cache = os.path.join(cache, f"gpu-{name}-{k}")
                measured = []
                for system, module, flags, fresh in systems(name, peers):
                    where = os.path.join(gpu_cache, system.split()[0] if fresh else "tinyad")
                    env = {"TINYAD_CACHE_DIR": where, "TI_OFFLINE_CACHE_FILE_PATH": where,
                           "JAX_COMPILATION_CACHE_DIR": where}
                    measured.append((system, run(module, [*args, *flags, "--arch", "cuda",
                                                          "--repeats", str(repeats)], env)))
                reference = references[name, label].result()
                rows += [(name, label, system, r, reference) for system, r in measured]
                rows.append((name, label, "tinyad cpu", reference, reference))
    return rows


def table(rows, width=None) -> str:
    head = (f"{'workload':<12}{'size':<25}{'system':<15}",
            f"{'arch':<5}{'compile s':>10}{'fwd+bwd s':>10}{'tinyad/x':>9}{'/unchecked':>11}"
            f"{'loss':>13}{'vs cpu':>9}")
    lines = []
    tinyad = {(w, s): r for w, s, m, r, _ in rows if m == "tinyad" and "error" not in r}
    for workload, size, system, r, reference in rows:
        key = f"{workload:<12}{size[:24]:<25}{system:<15}"
        if "error" in r:
            lines.append((key, f"error: {r['error']}"[:160]))
            continue
        ours = tinyad.get((workload, size))
        ratio = (f"{ours['fwd_bwd_s'] / r['fwd_bwd_s']:.2f}"
                 if ours and system in PEERS else "")
        cost = f"{r['fwd_bwd_s'] / ours['fwd_bwd_s']:.2f}" if ours and "checked" in system \
            else ""
        dev = None if system == "tinyad cpu" else deviation(r, reference)
        lines.append((key, f"{r.get('arch', '?'):<5}{r['compile_s']:>10.2f}"
                           f"{r['fwd_bwd_s']:>10.4f}{ratio:>9}{cost:>11}{r['loss']:>13.7g}"
                           f"{'' if dev is None else f'{dev:.1e}':>9}"))
    return "\n".join(tables.fit(head, lines, width))


def main(args, run) -> None:
    """Called by benchmarks/__main__.py for `--arch cuda` with its parsed arguments."""
    suite = QUICK if args.quick else SIZES
    names = args.only.split(",") if args.only else list(suite)
    unknown = [n for n in names if n not in suite]
    if unknown:
        raise SystemExit(f"unknown workload {', '.join(unknown)}; choose from "
                         f"{', '.join(suite)}")
    wanted = PEERS if args.peers is None else [p for p in args.peers.split(",")
                                               if p and p != "none"]
    peers = [p for p in wanted if p in PEERS and importlib.util.find_spec(p) is not None
             and not (p == "taichi" and args.no_taichi)]
    print(table(measure(suite, names, peers, args.repeats, run)))
    left_out = [p for p in wanted if p not in peers]
    if left_out:
        print(f"({', '.join(left_out)}: not importable or not a GPU peer, no rows)")
