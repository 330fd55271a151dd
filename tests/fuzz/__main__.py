"""The long fuzz profile: `python -m tests.fuzz --n 10000` (from the repository root).

Program k is generated from seed `--seed + k`, so any program the run reports is reproduced by
`python -m tests.fuzz --seed S --n 1 --show`. Every program runs in interp mode (f64, with the
finite-difference check); every `--fast-every`-th one also in fast mode (f64 and, with `--f32`,
f32), whose numba compile costs seconds per program. Programs that do not agree are written to
`--keep` for a regression test. Counts are printed every `--every` programs and at the end.

Programs run in `--jobs` worker processes, each replaced after `--per-process` programs: numba
never frees a compiled function, so one process that compiles every program grows by ~20 MB a
program (5.6 GB after 300).
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing
import sys
import time
from functools import partial
from pathlib import Path

from . import harness


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10000, help="programs to generate")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first program")
    parser.add_argument("--fast-every", type=int, default=10,
                        help="run every k-th program in fast mode too (0: never)")
    parser.add_argument("--f32", action="store_true", help="also compare the modes in f32")
    parser.add_argument("--small", action="store_true", help="smaller programs")
    parser.add_argument("--keep", type=Path, default=Path("tests/fuzz/findings"),
                        help="where programs that do not agree are written")
    parser.add_argument("--every", type=int, default=100, help="print counts this often")
    parser.add_argument("--show", action="store_true", help="print each program's source")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--per-process", type=int, default=50,
                        help="programs a worker runs before a fresh one replaces it")
    args = parser.parse_args(argv)

    counts = Counts()
    start = time.time()
    work = partial(harness.check_seeded, fast_every=args.fast_every, f32=args.f32, small=args.small)
    seeds = range(args.seed, args.seed + args.n)
    context = multiprocessing.get_context("spawn")   # no fork of a process with numba threads
    with context.Pool(args.jobs, maxtasksperchild=args.per_process) as pool:
        for k, (program, outcome, modes) in enumerate(pool.imap(work, seeds)):
            seed = args.seed + k
            if args.show:
                print(program.source)
            counts.add(program, outcome, modes)
            if outcome.kind not in ("agreed", "refused") or "[no user line]" in outcome.reason:
                args.keep.mkdir(parents=True, exist_ok=True)
                path = args.keep / f"seed{seed}.py"
                path.write_text(f"# {outcome.kind}: {outcome.reason}\n# modes: {modes}\n"
                                + program.source)
                print(f"seed {seed}: {outcome.kind}: {outcome.reason} -> {path}", flush=True)
            if (k + 1) % args.every == 0:
                counts.show(time.time() - start)
    counts.show(time.time() - start)
    return 0 if counts.clean() else 1


class Counts:
    def __init__(self):
        self.kinds = collections.Counter()
        self.reasons = collections.Counter()      # refusals and findings by reason
        self.generated = self.kernels = self.fast = 0
        self.fd_checked = self.fd_kinks = 0
        self.features = collections.Counter()

    def add(self, program, outcome, modes):
        self.generated += 1
        self.kernels += program.source.count("@ti.kernel")
        self.fast += "fast" in modes
        self.kinds[outcome.kind] += 1
        if outcome.kind != "agreed":
            self.reasons[f"{outcome.kind}: {outcome.reason[:110]}"] += 1
        self.fd_checked += outcome.checked
        self.fd_kinks += outcome.kinks
        self.features.update(program.features)

    def clean(self) -> bool:
        return not (self.kinds["disagreed"] or self.kinds["false-report"] or self.kinds["broken"])

    def show(self, seconds: float):
        k = self.kinds
        print(f"\n{self.generated} programs ({self.kernels} kernels; {self.fast} also in fast "
              f"mode) in {seconds:.0f} s: agreed {k['agreed']}, disagreed {k['disagreed']}, "
              f"false rule reports {k['false-report']}, refused {k['refused']}, "
              f"broken {k['broken']}; gradient elements checked against FD {self.fd_checked}, "
              f"skipped at kinks {self.fd_kinks}")
        for reason, count in self.reasons.most_common():
            print(f"  {count:6d}  {reason}")
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
