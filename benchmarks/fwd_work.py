"""What one forward-mode sweep must do more than the primal: float operations and bytes, counted
from the IR of every kernel each one launches (the tangent variants the sweep really ran), and
the time of a copy of those bytes.

    python -m benchmarks.fwd_work [--small]

For each workload: float ops (each float Op and float atomic in a kernel's IR counts once per
iteration of the loops around it; both branches of an `if` count), bytes accessed (field loads
and stores x element size x iterations), distinct bytes (the fields' elements the launches
touch, each field counted once per sweep, plus the duals FwdMode clears on entry), and the time
of a numpy copy of the distinct bytes each pass touches. A compute-bound kernel cannot run
faster than its op ratio; a memory-bound one than its byte ratio (benchmarks/README.md).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import tinyad as ti
from tinyad.core import ir
from tinyad.kernel import TracedKernel
from tinyad.runtime import runtime

from .fwd_cost import SMALL, WORKLOADS, _field


def _trip(loop: ir.For, scalars: dict) -> int:
    bounds = []
    for e in (loop.start, loop.stop):
        if isinstance(e, ir.Const):
            bounds.append(int(e.value))
        elif isinstance(e, ir.Var) and e.name in scalars:
            bounds.append(int(scalars[e.name]))
        else:
            return 1          # not static: counted once (none in the four workloads)
    return max(bounds[1] - bounds[0], 0)


def _key(e):
    """A structural key: two expressions with one key compute the same value (in one block)."""
    if isinstance(e, ir.Op):
        return (e.op, e.dtype.name, *(_key(a) for a in e.args))
    if isinstance(e, ir.Load):
        return ("load", id(e.field), *(_key(i) for i in e.indices))
    if isinstance(e, ir.Var):
        return ("var", e.name)
    return ("const", e.dtype.name, e.value)


def count(kernel_ir: ir.Kernel, scalars: dict) -> tuple[int, int]:
    """(float ops, bytes accessed) of one launch. Within a block an expression computed again
    counts once (the compiler computes it once), and negation counts as nothing (folded into a
    subtraction)."""
    ops = accessed = 0

    def expr_work(e, times, seen):
        nonlocal ops, accessed
        for sub in ir.walk_expr(e):
            if not isinstance(sub, (ir.Op, ir.Load)) or not sub.dtype.is_float:
                continue
            key = _key(sub)
            if key in seen:
                continue
            seen.add(key)
            if isinstance(sub, ir.Load):
                accessed += times * np.dtype(sub.field.dtype.np).itemsize
            elif sub.op not in ("cast", "neg"):
                ops += times

    def block(stmts, times):
        nonlocal ops, accessed
        seen, assigned = set(), set()
        for s in stmts:
            if isinstance(s, (ir.Store, ir.AtomicOp)):     # loads of the field are stale now
                seen = {k for k in seen if k[0] != "load" or k[1] != id(s.field)}
            elif isinstance(s, ir.Assign) and s.name in assigned:   # and a local's old value
                seen = {k for k in seen if ("var", s.name) not in _flat(k)}
            if isinstance(s, ir.Assign):
                assigned.add(s.name)
            if isinstance(s, ir.For):
                block(s.body, times * _trip(s, scalars))
                continue
            for e in ir.stmt_exprs(s):
                expr_work(e, times, seen)
            if isinstance(s, (ir.Store, ir.AtomicOp)):
                accessed += times * np.dtype(s.field.dtype.np).itemsize
                if isinstance(s, ir.AtomicOp) and s.field.dtype.is_float:
                    ops += times
                    accessed += times * np.dtype(s.field.dtype.np).itemsize   # read, then write
            if isinstance(s, ir.If):
                block(s.then, times)
                block(s.orelse, times)
            elif isinstance(s, ir.While):
                block(s.body, times)
    block(kernel_ir.body, 1)
    return ops, accessed


def _flat(key):
    for part in key:
        if isinstance(part, tuple):
            yield part
            yield from _flat(part)


class Recording:
    """Records (kernel IR, scalars) of every launch while it is open."""

    def __enter__(self):
        self.launches = []
        self.original = TracedKernel.launch
        recording = self

        def launch(traced, variant, scalars, *rest):
            recording.launches.append((traced.variant_ir(variant), traced.ir, scalars))
            return recording.original(traced, variant, scalars, *rest)
        TracedKernel.launch = launch
        return self

    def __exit__(self, *exc):
        TracedKernel.launch = self.original

    def totals(self):
        ops = accessed = 0
        touched = {}      # id(field) -> its bytes
        for kernel_ir, primal_ir, scalars in self.launches:
            named = {a.name: v for a, v in zip(primal_ir.args, scalars)}
            o, a = count(kernel_ir, named)
            ops, accessed = ops + o, accessed + a
            for f in ir.fields_of(kernel_ir.body):
                touched[id(f)] = ir.array_size(f) * np.dtype(f.dtype.np).itemsize
        return ops, accessed, touched


def copy_time(nbytes: int, repeats: int = 7) -> float:
    src = np.ones(max(nbytes // 4, 1), np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return best


def measure(build, sizes, param, loss):
    ti.init(mode="fast", default_fp=ti.f32, check="off")
    work = build(ti, **sizes)
    ti.root.lazy_dual()
    work.reset()
    param, loss = _field(param), _field(loss)
    seed = np.random.default_rng(0).uniform(-1, 1, param.dual.data.size).tolist()
    cleared = {id(f.dual): f.dual.data.nbytes for f in runtime.fields
               if f.has_dual and f.dual.is_placed}
    with Recording() as primal:
        work.forward()
    work.reset()
    with Recording() as sweep:
        with ti.ad.FwdMode(loss=loss, param=param, seed=seed):
            work.forward()
    return primal.totals(), sweep.totals(), cleared


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", action="store_true", help="small sizes (a smoke test)")
    args = parser.parse_args(argv)
    print(f"{'workload':<12} {'float ops':>9} {'bytes acc.':>10} {'distinct B':>10} "
          f"{'cleared MB':>10} {'copy ms primal/sweep':>21}   (ratios: sweep / primal)")
    for name, build, sizes, param, loss in WORKLOADS:
        primal, sweep, cleared = measure(build, SMALL[name] if args.small else sizes, param,
                                         loss)
        primal_bytes = sum(primal[2].values())
        distinct = sum({**sweep[2], **cleared}.values())
        copies = copy_time(primal_bytes), copy_time(distinct)
        print(f"{name:<12} {sweep[0] / primal[0]:>9.2f} {sweep[1] / primal[1]:>10.2f} "
              f"{distinct / primal_bytes:>10.2f} {sum(cleared.values()) / 2**20:>10.1f} "
              f"{copies[0] * 1e3:>10.2f}/{copies[1] * 1e3:<10.2f}", flush=True)


if __name__ == "__main__":
    main()
