"""What one forward-mode sweep costs: each workload's forward pass inside ti.ad.FwdMode (values
and tangents in one tangent kernel per launch) against the plain forward pass, fast mode, f32.

    python -m benchmarks.fwd_cost [--repeats 5] [--small]

Every float field gets a dual (ti.root.lazy_dual()); the parameter is a field whose gradient the
workload reports, seeded with a random direction. The ratio's goal is at most 1.5x.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tinyad as ti
from tinyad.runtime import runtime

from . import gravity, mass_spring, mpm, wave

# (name, build, reference sizes, parameter field, loss field)
WORKLOADS = [("gravity", gravity.build, {"n": 1024, "steps": 100}, "x", "U"),
             ("mass_spring", mass_spring.build, {"nx": 10, "ny": 5, "steps": 1024}, "amp", "loss"),
             ("wave", wave.build, {"n": 128, "steps": 256}, "init", "loss"),
             ("mpm", mpm.build, {"n": 8192, "grid": 128, "steps": 64}, "init_v", "loss")]
SMALL = {"gravity": {"n": 64, "steps": 10}, "mass_spring": {"nx": 4, "ny": 2, "steps": 32},
         "wave": {"n": 16, "steps": 8}, "mpm": {"n": 256, "grid": 16, "steps": 4}}


def _field(name):
    return next(f for f in runtime.fields if f.name == name)


def measure(build, sizes, param, loss, repeats, mode="fast"):
    ti.init(mode=mode, default_fp=ti.f32, check="off")
    work = build(ti, **sizes)
    ti.root.lazy_dual()
    work.reset()
    param, loss = _field(param), _field(loss)
    seed = np.random.default_rng(0).uniform(-1, 1, param.dual.data.size).tolist()

    def sweep():
        with ti.ad.FwdMode(loss=loss, param=param, seed=seed):
            work.forward()

    calls = {"forward": work.forward, "fwd_mode": sweep}
    for call in calls.values():
        work.reset()
        call()                                   # trace and compile
    # The two alternate, so a burst of load on the shared machine hits both alike.
    samples = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            work.reset()
            t = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - t)
    times = {name: statistics.median(values) for name, values in samples.items()}
    return times, float(loss.dual[None])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--small", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--mode", default="fast", choices=("fast", "interp"))
    args = parser.parse_args(argv)
    print(f"{'workload':<12} {'forward s':>10} {'FwdMode s':>10} {'ratio':>6} {'loss.dual':>12}")
    for name, build, sizes, param, loss in WORKLOADS:
        times, dual = measure(build, SMALL[name] if args.small else sizes, param, loss,
                              args.repeats, args.mode)
        print(f"{name:<12} {times['forward']:>10.4f} {times['fwd_mode']:>10.4f} "
              f"{times['fwd_mode'] / times['forward']:>6.2f} {dual:>12.5g}", flush=True)


if __name__ == "__main__":
    main()
