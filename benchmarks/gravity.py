"""N-body gravity driven by autodiff: forces are -dU/dx, by ti.ad.Tape(U).

    U = sum_{i,j} -1 / |x_i - x_j|,  |r| softened as r.norm(1e-3)
    one step:  with Tape(U): compute_U();  advance(): v -= dt * x.grad;  x += dt * v
    forward  = S x (U.fill(0); compute_U())
    fwd+bwd  = S x (Tape(U){compute_U()}; advance())
    x0 = default_rng(0).random((N, 2)) as float32, v0 = 0, dt = 1e-5

`python -m benchmarks.gravity --mode fast --n 1024 --steps 100` prints one JSON line. With
`--taichi` the same program runs under Taichi (if importable) instead of tinyad.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def build(ti, n, dt=1e-5):
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

    def forward(steps):
        for _ in range(steps):
            U.fill(0)
            compute_U()

    def fwd_bwd(steps):
        for _ in range(steps):
            with ti.ad.Tape(loss=U):
                compute_U()
            advance()

    return x, U, compute_U, reset, forward, fwd_bwd


def measure(ti, n, steps, repeats):
    x, U, compute_U, reset, forward, fwd_bwd = build(ti, n)
    reset()
    t0 = time.perf_counter()
    forward(1)                     # the first launches: trace + compile (or load the cache)
    fwd_bwd(1)
    first = time.perf_counter() - t0
    reset()
    with ti.ad.Tape(loss=U):       # U and dU/dx at x0
        compute_U()
    u0, g0 = float(U[None]), x.grad.to_numpy()[0].tolist()
    times_f, times_fb = [], []
    for _ in range(repeats):
        reset()
        t = time.perf_counter()
        forward(steps)
        times_f.append(time.perf_counter() - t)
        reset()
        t = time.perf_counter()
        fwd_bwd(steps)
        times_fb.append(time.perf_counter() - t)
    return {"n": n, "steps": steps, "first_calls_s": first,
            "forward_s": statistics.median(times_f), "fwd_bwd_s": statistics.median(times_fb),
            "U0": u0, "grad0": g0, "x_final0": x.to_numpy()[0].tolist()}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="fast")
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--taichi", action="store_true")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    if args.taichi:
        import taichi as ti
        ti.init(arch=ti.cpu, default_fp=ti.f32, cpu_max_num_threads=2)
    else:
        import tinyad as ti
        ti.init(mode=args.mode, default_fp=ti.f32, check="off")
    started = time.perf_counter() - t0
    result = measure(ti, args.n, args.steps, args.repeats)
    result["import_s"] = started
    result["mode"] = "taichi" if args.taichi else args.mode
    print(json.dumps(result))


if __name__ == "__main__":
    main()
