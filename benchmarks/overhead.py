"""Launch overhead: the Python-side cost of one kernel call, one grad call, one Tape.

`python -m benchmarks.overhead [--taichi]` prints one JSON line of microseconds per call
(median of 5 batches) for tinyad's fast and interp modes (and Taichi's CPU backend), on
kernels that do almost nothing.
"""
import argparse
import json
import statistics
import time


def per_call(fn, calls):
    batches = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        batches.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(batches)


def taped_launch(ti, x=None):
    """A Tape around one small kernel (over x, made here unless given): `(tape, kernel)`."""
    x = ti.field(ti.f32, shape=4, needs_grad=True) if x is None else x
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def small():
        for i in range(4):
            loss[None] += x[i] * x[i]

    def tape():
        with ti.ad.Tape(loss=loss):
            small()
    return tape, small


def measure(ti, label, calls):
    x = ti.field(ti.f32, shape=4, needs_grad=True)

    @ti.kernel
    def empty():
        pass

    @ti.kernel
    def one_arg(s: ti.f32):
        x[0] = s

    tape, small = taped_launch(ti, x)
    empty()
    one_arg(1.0)
    tape()
    return {f"{label}_empty_us": per_call(empty, calls),
            f"{label}_one_arg_us": per_call(lambda: one_arg(1.0), calls),
            f"{label}_grad_us": per_call(small.grad, calls),
            f"{label}_tape_us": per_call(tape, max(calls // 10, 10))}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--taichi", action="store_true", help="also Taichi's CPU backend")
    args = parser.parse_args(argv)
    import tinyad
    tinyad.init(mode="fast", check="off")
    result = measure(tinyad, "fast", args.calls)
    tinyad.init(mode="interp", check="off")
    result.update(measure(tinyad, "interp", max(args.calls // 10, 10)))
    if args.taichi:
        import taichi
        taichi.init(arch=taichi.cpu, cpu_max_num_threads=2, log_level=taichi.ERROR)
        result.update(measure(taichi, "taichi", max(args.calls // 10, 10)))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
