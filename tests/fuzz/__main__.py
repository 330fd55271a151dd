"""The long fuzz profile: `python -m tests.fuzz --n 10000` (from the repository root).

Program k is generated from seed `--seed + k`, so any program the run reports is reproduced by
`python -m tests.fuzz --seed S --n 1 --show`. Every program runs in interp mode (f64, with the
finite-difference check); every `--fast-every`-th one also in fast mode (f64 and, with `--f32`,
f32), whose numba compile costs seconds per program. Programs that do not agree are written to
`--keep` for a regression test. Counts are printed every `--every` programs and at the end.

Programs run in `--jobs` worker processes, each replaced after `--per-process` programs: numba
never frees a compiled function, so one process that compiles every program grows by ~20 MB a
program (5.6 GB after 300).

`--plant` fuzzes the rule checker instead (tests/fuzz/plant.py, plantcheck.py): program k is
clean program `--seed + k` with one violation of a rule planted (`--rule`, or each rule in turn),
run in interp and fast mode, which must both raise the same report, while the clean original
passes in both. `python -m tests.fuzz --plant --rule race --seed S --n 1 --show` shows one.
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing
import sys
import time
from functools import partial
from pathlib import Path

from . import harness, plant, plantcheck


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
    parser.add_argument("--plant", action="store_true",
                        help="plant one rule violation per program; both modes must report it "
                             "alike (--fast-every, --f32 do not apply)")
    parser.add_argument("--rule", choices=["all", *plant.PLANTS], default="all",
                        help="with --plant: the rule to break (all: each in turn)")
    args = parser.parse_args(argv)
    if args.plant:
        return planted(args)

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


def planted(args) -> int:
    rules = list(plant.PLANTS) if args.rule == "all" else [args.rule]
    jobs = [(args.seed + k, rules[k % len(rules)]) for k in range(args.n)]
    tally = PlantTally()
    start = time.time()
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.jobs, maxtasksperchild=args.per_process) as pool:
        work = partial(plantcheck.check_job, small=args.small)
        for k, (seed, program, outcome) in enumerate(pool.imap(work, jobs)):
            if args.show:
                print(program.program.source)
            tally.add(outcome)
            if outcome.kind not in ("caught", "caught-no-iteration"):
                print(f"seed {seed} --rule {outcome.rule}: {outcome.kind}: {outcome.reason}",
                      flush=True)
            if outcome.kind in ("disagreed", "missed", "broken") and args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                path = args.keep / f"plant-{outcome.rule}-seed{seed}.py"
                path.write_text(f"# {outcome.kind}: {outcome.reason}\n# planted: "
                                f"{program.plant.what}\n" + program.program.source)
            if (k + 1) % args.every == 0:
                tally.show(time.time() - start)
    tally.show(time.time() - start)
    return 0 if tally.clean() else 1


class PlantTally:
    KINDS = ("caught", "caught-no-iteration", "disagreed", "missed", "false-report", "broken")

    def __init__(self):
        self.by_rule = collections.defaultdict(collections.Counter)
        self.keys = collections.defaultdict(collections.Counter)   # rule -> differing keys

    def add(self, outcome):
        self.by_rule[outcome.rule]["programs"] += 1
        self.by_rule[outcome.rule][outcome.kind] += 1
        self.keys[outcome.rule].update(outcome.keys)

    def clean(self) -> bool:
        """Every plant caught alike (the iterations fast mode does not know yet aside)."""
        return all(c["caught"] + c["caught-no-iteration"] == c["programs"]
                   for c in self.by_rule.values())

    def show(self, seconds: float):
        total = sum((c for c in self.by_rule.values()), collections.Counter())
        print(f"\n{total['programs']} planted programs in {seconds:.0f} s")
        print(f"  {'rule':13}{'programs':>9}" + "".join(f"{k:>20}" for k in self.KINDS))
        for rule, c in sorted(self.by_rule.items()) + [("all", total)]:
            print(f"  {rule:13}{c['programs']:9d}" + "".join(f"{c[k]:20d}" for k in self.KINDS))
        for rule, keys in sorted(self.keys.items()):
            if keys:
                print(f"  {rule}: where reports differ: "
                      + ", ".join(f"{k} {n}" for k, n in keys.most_common()))
        sys.stdout.flush()


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
