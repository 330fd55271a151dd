"""Launch overhead: the Python-side cost of one kernel call, one grad call, one Tape.

`python -m benchmarks.overhead` prints one JSON line of microseconds per call (median of 5
batches) for fast mode and interp mode, on a kernel that does almost nothing.
"""
import argparse
import json
import statistics
import time

import tinyad as ti   # module level: kernel annotations (ti.f32) are evaluated in its globals


def per_call(fn, calls):
    batches = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        batches.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(batches)


def measure(mode, calls):
    ti.init(mode=mode, check="off")
    x = ti.field(ti.f32, shape=4, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def empty():
        pass

    @ti.kernel
    def one_arg(s: ti.f32):
        x[0] = s

    @ti.kernel
    def small():
        for i in range(4):
            loss[None] += x[i] * x[i]

    empty()
    one_arg(1.0)
    with ti.ad.Tape(loss=loss):
        small()

    def tape():
        with ti.ad.Tape(loss=loss):
            small()
    return {f"{mode}_empty_us": per_call(empty, calls),
            f"{mode}_one_arg_us": per_call(lambda: one_arg(1.0), calls),
            f"{mode}_grad_us": per_call(small.grad, calls),
            f"{mode}_tape_us": per_call(tape, max(calls // 10, 10))}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args(argv)
    result = measure("fast", args.calls)
    result.update(measure("interp", max(args.calls // 10, 10)))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
