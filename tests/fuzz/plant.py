"""Planted bugs: a clean random program (gen.py) with one violation of a chosen rule added.

`planted(seed, rule)` generates program `seed` as the clean fuzzer does, then adds kernels (and
at times a step of the driver: a kernel launched between the forward pass and its sweep, a
Python write inside the Tape, a sweep left unseeded or a gradient left uncleared) that break
exactly one rule of tinyad/check/rules.py, and says which error (or warning) the checker must
give. The plant's choices come from their own random stream, so the clean program is the one
`gen.generate_seeded(seed)` makes. The harness runs both in each mode (plantcheck.py).

Each plant guarantees its violation: the element it changes is read by a kernel whose adjoint
replays that read (a product with a parameter), and the change changes its value.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from . import gen


@dataclass
class Plant:
    rule: str          # the name below
    expected: str      # the error class both modes must raise, or the warning's rule name
    warning: bool      # expected is a printed warning, not a raised error
    what: str          # one line: what was planted


@dataclass
class Planted:
    clean: gen.Program
    program: gen.Program
    plant: Plant


class PlantDraw(gen.RandomDraw):
    """The plant's own choices, apart from the program's (a string seed hashes stably)."""

    def __init__(self, seed: int, rule: str):
        self.rng = random.Random(f"plant:{rule}:{seed}")


def _kernel(g: gen.Generator, loop: str, lines: list[str]) -> str:
    return g.kernel(["()", loop], lambda out, pad: out.extend(pad + line for line in lines))


def _launch(g: gen.Generator, kernel: str, reads: set, writes: set, at: int | None = None):
    """Launch `kernel` at position `at` of the forward pass (the end if None)."""
    entry = (kernel, "()", reads, writes)
    g.launches.insert(len(g.launches) if at is None else at, entry)


def _reader(g: gen.Generator, d: gen.Draw, name: str, index: str = "i") -> int:
    """A kernel adding name[index] * x[i] (a read its adjoint replays: the factor of x's
    gradient) to the loss, launched somewhere in the forward pass: -> its position."""
    c = d.const(0.1, 0.9)
    k = _kernel(g, "for i in range(N):", [f"loss[None] += {c} * {name}[{index}] * x[i]"])
    at = d.integer(0, len(g.launches) - 1)      # before the loss kernels' end at least
    reads = {"x", name} | ({"idx"} if "idx" in index else set())
    _launch(g, k, reads, {"loss"}, at)
    return at


def _changed_scalar(g: gen.Generator, d: gen.Draw) -> str:
    """A scalar field whose reads a plant may change: a parameter or the data field."""
    return d.choice(["x"] + [f.name for f in g.fields if f.role == "data"])


def overwrite(g, d, extra):
    """Global Data Access Rule 1: a field read in the Tape is changed later in it."""
    extra["manual"] = False     # (outside a Tape, the same is a replay divergence: `outside`)
    name = _changed_scalar(g, d)
    at = _reader(g, d, name)
    c = d.const(0.1, 0.9)
    first = d.integer(0, g.n - 2)
    body = d.choice([f"{name}[i] += {c}", f"{name}[i] = {name}[i] * 0.5 + {c}",
                     f"ti.atomic_add({name}[i], {c})"])
    k = _kernel(g, f"for i in range({first}, N):", [body])
    _launch(g, k, {name}, {name}, d.integer(at + 1, len(g.launches)))
    return Plant("overwrite", "ReadThenOverwriteRuleError", False, f"{k}: {body}")


def second_write(g, d, extra, accumulate=False):
    """Global Data Access Rule 2 (store, read, store), or a read between two +=, in a Tape."""
    extra["manual"] = False
    f = g.new_field("scalar")
    f.written = True
    extra["state"].append(f.name)
    op = "+=" if accumulate else "="
    c = d.const(0.1, 0.9)
    lines = [f"{f.name}[i] {op} ti.sin(x[i])",
             f"loss[None] += {f.name}[i] * {f.name}[i]",
             f"{f.name}[i] {op} {c}"]
    at = d.integer(0, len(g.launches))
    if d.chance(0.5):       # all in one kernel
        k = _kernel(g, "for i in range(N):", lines)
        _launch(g, k, {"x", f.name}, {f.name, "loss"}, at)
        what = f"{k}: " + "; ".join(lines)
    else:                   # one kernel per line, launched in order
        names = []
        for n, line in enumerate(lines):
            names.append(_kernel(g, "for i in range(N):", [line]))
            reads = {"x"} if n == 0 else {f.name}
            _launch(g, names[-1], reads, {"loss"} if n == 1 else {f.name}, at + n)
        what = f"{names[-1]}: {lines[-1]}"
    expected = "ReadDuringAccumulationRuleError" if accumulate else "SecondWriteRuleError"
    return Plant("accumulate" if accumulate else "second-write", expected, False, what)


def accumulate(g, d, extra):
    return second_write(g, d, extra, accumulate=True)


# Where a race plant puts its access in the iteration: as it is, in a branch always taken, in a
# loop whose length only the launch knows, or in a while loop (the last three are what fast
# mode records through a cursor, tinyad/check/accessrecord.py).
RACE_WRAPS = {
    "plain": lambda body: [body],
    "branch": lambda body: ["if x[i] > -1.0e9:", "    " + body],
    "dynamic": lambda body: ["for k in range(ti.cast(x[0] * 0.0, ti.i32) + 1):", "    " + body],
    "while": lambda body: ["k = 0", "while k < 1:", "    " + body, "    k += 1"],
}


def race(g, d, extra):
    """Two iterations of a parallel loop meet at an element: a shift in place, or two stores
    of one element (wrapped as one of RACE_WRAPS)."""
    f = g.new_field("scalar")
    f.written = True
    extra["state"].append(f.name)
    n = f.name
    if d.chance(0.5):
        loop, body = "for i in range(1, N):", f"{n}[i] = {n}[i - 1] * 0.5 + x[i]"
    else:
        loop, body = "for i in range(N):", f"{n}[i // 2] = x[i] * {d.const(0.5, 1.5)}"
    at = d.integer(0, len(g.launches))
    wrap = d.choice(sorted(RACE_WRAPS))
    k = _kernel(g, loop, RACE_WRAPS[wrap](body))
    _launch(g, k, {"x", n}, {n}, at)
    total = _kernel(g, "for i in range(N):", [f"loss[None] += {n}[i] * {n}[i]"])
    _launch(g, total, {n}, {"loss"}, at + 1)
    return Plant("race", "ParallelConflictRuleError", False, f"{k}: {body}")


def index(g, d, extra):
    """The integer field that steers a gather is changed in the Tape after the gather read
    it."""
    extra["manual"] = False
    at = _reader(g, d, "x", "idx[i]")
    body = d.choice(["idx[i] = (idx[i] + 1) % N", "idx[i] = (idx[i] + N - 1) % N"])
    k = _kernel(g, "for i in range(N):", [body])
    _launch(g, k, {"idx"}, {"idx"}, d.integer(at + 1, len(g.launches)))
    return Plant("index", "ReadThenOverwriteRuleError", False, f"{k}: {body}")


def outside(g, d, extra):
    """A kernel outside the Tape changes a field between the forward pass and its sweep."""
    name = _changed_scalar(g, d)
    _reader(g, d, name)
    body = f"{name}[i] += {d.const(0.1, 0.9)}"
    k = _kernel(g, "for i in range(N):", [body])
    extra.update(manual=True, between=f"[({k}, ())]")
    return Plant("outside", "ReplayDivergenceRuleError", False, f"{k}: {body}, after the forward")


def python(g, d, extra):
    """Python scope writes a field inside the Tape, after a kernel read it."""
    name = _changed_scalar(g, d)
    _reader(g, d, name)
    element = d.integer(0, g.n - 1)
    extra.update(manual=False, python_write=f"({name}, {element})")
    return Plant("python", "ReadThenOverwriteRuleError", False,
                 f"{name}[{element}] += 0.5 in Python, in the Tape")


def unseeded(g, d, extra):
    """A manual sweep with no gradient seeded."""
    extra.update(manual=True, rounds=1, seeded=False)
    return Plant("unseeded", "Unseeded gradient (warning)", True, "loss.grad not seeded")


def stale(g, d, extra):
    """Two manual sweeps, the parameters changed between them, their gradients not cleared
    (x's is not zero: a product with x reaches the loss, so the step between them moves x)."""
    _reader(g, d, "x")
    extra.update(manual=True, rounds=2, keep_grads=True)
    return Plant("stale", "StaleGradientRuleError", False, "x.grad not cleared between rounds")


PLANTS = {"overwrite": overwrite, "second-write": second_write, "accumulate": accumulate,
          "race": race, "index": index, "outside": outside, "python": python,
          "unseeded": unseeded, "stale": stale}


def planted(seed: int, rule: str, small: bool = False) -> Planted:
    g = gen.Generator(gen.RandomDraw(seed), small)
    clean = g.program()
    clean.seed = seed
    state, manual, rounds = g.shape
    extra = {"state": [f.name for f in state], "manual": manual, "rounds": rounds}
    plant = PLANTS[rule](g, PlantDraw(seed, rule), extra)
    g.features.add(f"plant:{rule}")
    source = _render(g, extra)
    return Planted(clean, gen.Program(source, set(g.features), seed), plant)


def _render(g: gen.Generator, extra: dict) -> str:
    """The program's source with the plant: gen's rendering, and the driver's keys added."""
    state = [f for f in g.fields if f.name in extra["state"]]
    source = g.source(state, extra["manual"], extra["rounds"])
    keys = "".join(f", {key}={extra[key]}" for key in
                   ("between", "python_write", "seeded", "keep_grads") if key in extra)
    tail = f"rounds={extra['rounds']})\n"
    assert source.endswith(tail), source[-80:]
    return source[:-len(tail)] + f"rounds={extra['rounds']}{keys})\n"
