"""What every workload module shares: its command line, starting tinyad or Taichi, timing.

A workload's `build(ti, ...)` returns a `Workload`; `run(build, sizes)` parses the command line,
starts the chosen system, measures and prints one JSON line:

    first_calls_s  the first forward + fwd_bwd (tracing and compiling, or loading the cache;
                   with --capture, capturing them too)
    compile_s      first_calls_s minus one steady-state forward and fwd_bwd (the reference figures'
                   "compile": cold first calls minus steady state)
    settle_s       after the first calls, waiting for what compiles beside them (--capture: the
                   captured programs, compile/sequence.py); 0 otherwise
    forward_s, fwd_bwd_s   medians over --repeats runs, each from the same inputs (reset)
    forward_cpu_s, fwd_bwd_cpu_s   the same runs' CPU seconds (time.process_time), medians
    loss, grads    after the first fwd_bwd: the numbers benchmarks/README.md describes
    import_s       importing and initialising the system
    peak_rss_mb    the process's peak resident memory (libraries included)

With --memory the run measures memory instead of time: tracemalloc follows every allocation
from the workload's build on (fields, the checker's summaries, temporaries), through the
first calls and one more fwd_bwd, and `traced_peak_mb` is the highest total it saw (the
memory the workload itself takes, without the interpreter's and libraries' baseline).
"""
import argparse
import json
import os
import resource
import statistics
import time
import tracemalloc
from dataclasses import dataclass
from typing import Callable


@dataclass
class Workload:
    reset: Callable       # set the inputs
    forward: Callable     # the timed forward pass
    fwd_bwd: Callable     # the timed forward and backward pass
    result: Callable      # -> (loss, {gradient label: value})
    settle: Callable = None   # after the first calls, before the timed runs (ti.capture's wait)


def start(args):
    """Import and initialise tinyad (in --mode) or Taichi (--taichi) on --arch:
    -> (module, seconds)."""
    t0 = time.perf_counter()
    if args.taichi:
        import taichi as ti
        if args.arch == "cuda":
            ti.init(arch=ti.cuda, default_fp=ti.f32, log_level=ti.ERROR)
        else:
            ti.init(arch=ti.cpu, default_fp=ti.f32, cpu_max_num_threads=2, log_level=ti.ERROR)
    else:
        import tinyad as ti
        ti.init(mode=args.mode, arch=args.arch, default_fp=ti.f32, check=args.check)
    return ti, time.perf_counter() - t0


def ran_on(ti, args) -> str:
    """Where the work ran: "cpu" or "cuda" (tinyad falls back to the CPU without a GPU)."""
    if args.taichi:
        return args.arch
    from tinyad.runtime import runtime  # noqa: PLC0415
    return getattr(runtime.backend, "target", "cpu")


def wait_for_start():
    """Copies started together (benchmarks/concurrent.py) measure from one moment on."""
    start_at = os.environ.get("BENCH_START_AT")
    if start_at:
        time.sleep(max(float(start_at) - time.time(), 0.0))


def measure(work: Workload, repeats: int, sync=lambda: None) -> dict:
    """`sync` waits for the device (a GPU runs kernels asynchronously): each timing ends
    with it."""
    forward, fwd_bwd, settle = work.forward, work.fwd_bwd, work.settle
    work = Workload(work.reset, lambda: (forward(), sync()), lambda: (fwd_bwd(), sync()),
                    work.result)
    work.reset()
    t0 = time.perf_counter()
    work.forward()
    work.fwd_bwd()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    if settle is not None:
        settle()
    settled = time.perf_counter() - t0
    loss, grads = work.result()
    wait_for_start()
    times_f, times_fb, cpu_f, cpu_fb = [], [], [], []
    for _ in range(repeats):
        work.reset()
        t, c = time.perf_counter(), time.process_time()
        work.forward()
        times_f.append(time.perf_counter() - t)
        cpu_f.append(time.process_time() - c)
        work.reset()
        t, c = time.perf_counter(), time.process_time()
        work.fwd_bwd()
        times_fb.append(time.perf_counter() - t)
        cpu_fb.append(time.process_time() - c)
    fwd, fb = statistics.median(times_f), statistics.median(times_fb)
    return {"first_calls_s": first, "compile_s": max(first - fwd - fb, 0.0),
            "settle_s": settled,
            "forward_s": fwd, "fwd_bwd_s": fb, "loss": float(loss),
            "grads": {k: float(v) for k, v in grads.items()},
            # CPU seconds (all threads): what other jobs on a busy machine inflate least
            "forward_cpu_s": statistics.median(cpu_f), "fwd_bwd_cpu_s": statistics.median(cpu_fb)}


def run(build, sizes: dict, argv=None):
    """The workload's `main`: sizes maps each size option to its default, e.g. {"n": 128}."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="fast", choices=("interp", "fast"))
    parser.add_argument("--check", default="off", choices=("off", "warn", "error"),
                        help="tinyad's rule checker (both modes)")
    parser.add_argument("--taichi", action="store_true", help="run under Taichi instead")
    parser.add_argument("--arch", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--repeats", type=int, default=3)
    for name, default in sizes.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--capture", action="store_true",
                        help="tinyad: run forward and fwd_bwd as ti.capture'd functions")
    parser.add_argument("--memory", action="store_true",
                        help="measure the workload's peak traced memory instead of time")
    args = parser.parse_args(argv)
    ti, started = start(args)
    size = {name: getattr(args, name) for name in sizes}
    if args.memory:
        print(json.dumps({**size, **traced_peak(lambda: build(ti, **size)),
                          "mode": "taichi" if args.taichi else args.mode}))
        return
    work = build(ti, **size)
    if args.capture:       # a user's captured version: the same functions, under ti.capture
        work = _captured(ti, work, checked=args.check != "off")
    result = {**size, **measure(work, args.repeats, ti.sync), "import_s": started,
              "mode": "taichi" if args.taichi else args.mode, "arch": ran_on(ti, args),
              "peak_rss_mb": peak_rss_mb()}
    print(json.dumps(result))


def _captured(ti, work: Workload, checked: bool) -> Workload:
    """The workload's functions under ti.capture. Their programs compile beside the first
    calls (compile/sequence.py); the timed runs wait for them first (`settle_s`), so that
    they time the replays. With the checks on, a function's program depends on the checker's
    state its call meets (a forward after fwd_bwd's Tape copies the point of its gradients,
    the first forward does not): one round of both calls more, and its programs waited for,
    brings the ones the timed runs replay."""
    forward, fwd_bwd = ti.capture(work.forward), ti.capture(work.fwd_bwd)

    def settle():
        forward.wait()
        fwd_bwd.wait()
        if checked:
            for call in (forward, fwd_bwd):
                work.reset()
                call()
            forward.wait()
            fwd_bwd.wait()
    return Workload(work.reset, forward, fwd_bwd, work.result, settle)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # (Linux: KiB)


def traced_peak(make) -> dict:
    """The most memory allocated at once from the workload's build through its first calls
    and one more fwd_bwd, as tracemalloc counts it (numpy arrays included)."""
    tracemalloc.start()
    try:
        work = make()
        work.reset()
        work.forward()
        work.fwd_bwd()
        loss, _ = work.result()
        work.reset()
        work.fwd_bwd()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return {"traced_peak_mb": peak / 2**20, "loss": float(loss), "peak_rss_mb": peak_rss_mb()}
