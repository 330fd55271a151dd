"""The workloads written for Warp (warp-lang, CPU) and JAX (jax[cpu]), as a user of each would.

One module per system and workload: `warp_wave.py`, `jax_mpm.py`, ... Each computes what its
tinyad module (benchmarks/<workload>.py, whose docstring is the spec) computes: same equations,
constants, inputs, loss and gradients, and prints the same JSON line (benchmarks/harness.py):

    python -m benchmarks.peers.jax_wave --n 128 --steps 256

A module's `build(lib, **sizes)` takes the imported system (`warp` or `jax`), as the tinyad
modules take `ti`, so that `import_s` times importing and initialising it. Warp runs its CPU
device (one thread per launch); JAX its CPU backend (XLA's threads). Cold and warm compile: each
system's own on-disk cache, pointed at a fresh directory by `WARP_CACHE_PATH` and
`JAX_COMPILATION_CACHE_DIR` (JAX caches nothing across processes unless that is set).
"""
import argparse
import json
import os
import time

from ..harness import Workload, measure  # noqa: F401  (Workload: for the modules)

SYSTEMS = ("warp", "jax")


def warp_taped(wp, arrays, record, loss) -> None:
    """Warp's forward and backward pass, as `with ti.ad.Tape(loss): record()` is: the arrays'
    gradients from zero (Warp's accumulate), `record()` on a tape, then its backward."""
    for a in arrays:
        a.grad.zero_()
    tape = wp.Tape()
    with tape:
        record()
    tape.backward(loss=loss)


def start(system, arch="cpu"):
    """Import and initialise Warp or JAX on the CPU or the GPU ("cuda"): -> (module, seconds)."""
    t0 = time.perf_counter()
    if system == "warp":
        import warp as lib
        lib.config.quiet = True
        lib.init()
        lib.set_device("cuda:0" if arch == "cuda" else "cpu")
    else:
        import jax as lib
        lib.config.update("jax_platforms", arch)
        cache = os.environ.get("JAX_COMPILATION_CACHE_DIR")
        if cache:                   # cache every compiled function, however small or quick
            lib.config.update("jax_compilation_cache_dir", cache)
            lib.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            lib.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        lib.numpy.zeros(1).block_until_ready()
    return lib, time.perf_counter() - t0


def run(build, system, sizes: dict, argv=None):
    """A peer module's `main`: sizes maps each size option to its default, e.g. {"n": 128}."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--arch", default="cpu", choices=("cpu", "cuda"))
    for name, default in sizes.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args(argv)
    lib, started = start(system, args.arch)
    size = {name: getattr(args, name) for name in sizes}
    result = {**size, **measure(build(lib, **size), args.repeats), "import_s": started,
              "mode": system, "arch": args.arch}
    print(json.dumps(result))
