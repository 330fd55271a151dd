"""What the rule checker costs in interp mode: the same Tape (forward + backward) over a kernel
of 10^5 element updates, with checks off and on, side by side in one run.

    python -m benchmarks.check_cost [--n 100000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tinyad as ti


def build(n: int):
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    y = ti.field(ti.f32, shape=n, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)
    x.from_numpy(np.random.default_rng(0).random(n, dtype=np.float32))

    @ti.kernel
    def update():
        for i in x:
            y[i] = ti.sin(x[i]) * x[i] + 1.0

    @ti.kernel
    def reduce():
        for i in y:
            loss[None] += y[i] * y[i]

    def step():
        with ti.ad.Tape(loss=loss):
            update()
            reduce()
    return step


def median_seconds(check: str, n: int, repeat: int) -> float:
    ti.init(check=check)
    step = build(n)
    step()   # trace and build the adjoints once
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args(argv)
    off = median_seconds("off", options.n, options.repeat)
    on = median_seconds("error", options.n, options.repeat)
    print(f"interp, Tape over 2 kernels, {options.n} elements (4 x 10^5 element accesses "
          "forward, as many backward), median of", options.repeat)
    print(f"{'checks':<8}{'seconds':>10}{'ratio':>8}")
    print(f"{'off':<8}{off:>10.3f}{1:>8.2f}")
    print(f"{'on':<8}{on:>10.3f}{on / off:>8.2f}")


if __name__ == "__main__":
    main()
