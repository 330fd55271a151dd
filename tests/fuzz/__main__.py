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
Fast mode compiles each program (5-10 s of CPU), so a long run goes in chunks: with
`--results FILE` each outcome is appended to FILE (one JSON line) as it comes, a run started
again with the same FILE and arguments skips the programs FILE holds, and the table printed
covers all of them (`--summary` prints it without running anything):
  python -m tests.fuzz --plant --count 2000 --seed 0 --results plants.jsonl
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import sys
import time
from functools import partial
from pathlib import Path

from . import harness, plant, plantcheck


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--n", "--count", type=int, default=10000, dest="n",
                        help="programs to generate")
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
    parser.add_argument("--results", type=Path,
                        help="with --plant: append each outcome to this JSON-lines file, and "
                             "skip the programs it holds already (a run in chunks)")
    parser.add_argument("--summary", action="store_true",
                        help="with --plant --results: print the table of the file, run nothing")
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
    done = set()
    if args.results and args.results.exists():
        for line in args.results.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                if record.get("small", False) != args.small:
                    sys.exit(f"{args.results} holds programs generated with"
                             f"{'' if record.get('small') else 'out'} --small: not these")
                done.add((record["seed"], record["rule"]))
                tally.add(plantcheck.PlantOutcome(record["kind"], record["rule"],
                                                  record["reason"], tuple(record["keys"])),
                          record["seed"])
    if args.summary:
        tally.show(None)
        return 0 if tally.clean() else 1
    jobs = [job for job in jobs if job not in done]
    if done:
        print(f"{len(done)} programs in {args.results} already; {len(jobs)} to run", flush=True)
    start = time.time()
    for k, (seed, program, outcome) in enumerate(_run_planted(args, jobs)):
        if args.show:
            print(program.program.source)
        tally.add(outcome, seed)
        if args.results:
            with args.results.open("a") as out:
                out.write(json.dumps({"seed": seed, "rule": outcome.rule,
                                      "kind": outcome.kind, "reason": outcome.reason,
                                      "keys": list(outcome.keys),
                                  "small": args.small}) + "\n")
        if outcome.kind != "caught":
            print(f"seed {seed} --rule {outcome.rule}: {outcome.kind}: {outcome.reason}",
                  flush=True)
        if outcome.kind in ("disagreed", "missed", "broken") and args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            path = args.keep / f"plant-{outcome.rule}-seed{seed}.py"
            path.write_text(f"# {outcome.kind}: {outcome.reason}\n# planted: "
                            f"{program.plant.what}\n" + program.program.source)
        if (k + 1) % args.every == 0:
            tally.show(time.time() - start, k + 1)
    tally.show(time.time() - start, len(jobs))
    return 0 if tally.clean() else 1


def _run_planted(args, jobs):
    """(seed, Planted, PlantOutcome) of each job, in order, from worker processes."""
    if not jobs:
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.jobs, maxtasksperchild=args.per_process) as pool:
        yield from pool.imap(partial(plantcheck.check_job, small=args.small), jobs)


class PlantTally:
    KINDS = ("caught", "caught-no-iteration", "disagreed", "missed", "false-report", "broken")
    HEADINGS = ("identical", "iteration-only", "disagreed", "missed", "false report", "broken")

    def __init__(self):
        self.by_rule = collections.defaultdict(collections.Counter)
        self.keys = collections.defaultdict(collections.Counter)   # rule -> differing keys
        self.seeds = collections.defaultdict(list)     # kind -> [(seed, rule)], but "caught"

    def add(self, outcome, seed=None):
        self.by_rule[outcome.rule]["programs"] += 1
        self.by_rule[outcome.rule][outcome.kind] += 1
        self.keys[outcome.rule].update(outcome.keys)
        if outcome.kind != "caught":
            self.seeds[outcome.kind].append((seed, outcome.rule))

    def clean(self) -> bool:
        """Every plant caught alike (the iterations fast mode does not know yet aside)."""
        return all(c["caught"] + c["caught-no-iteration"] == c["programs"]
                   for c in self.by_rule.values())

    def show(self, seconds: float | None, ran: int = 0):
        total = sum((c for c in self.by_rule.values()), collections.Counter())
        rate = f" ({seconds / ran:.1f} s a program)" if seconds and ran else ""
        took = f" ({ran} run in {seconds:.0f} s{rate})" if seconds is not None else ""
        print(f"\n{total['programs']} planted programs{took}")
        print(f"  {'rule':13}{'programs':>9}" + "".join(f"{k:>15}" for k in self.HEADINGS))
        for rule, c in sorted(self.by_rule.items()) + [("all", total)]:
            print(f"  {rule:13}{c['programs']:9d}" + "".join(f"{c[k]:15d}" for k in self.KINDS))
        for rule, keys in sorted(self.keys.items()):
            if keys:
                print(f"  {rule}: where reports differ: "
                      + ", ".join(f"{k} {n}" for k, n in keys.most_common()))
        for kind, heading in zip(self.KINDS[1:], self.HEADINGS[1:]):
            if self.seeds[kind]:
                print(f"  {heading}: " + ", ".join(f"{seed} ({rule})"
                                                   for seed, rule in sorted(self.seeds[kind])))
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
