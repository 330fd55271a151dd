"""What a captured function does to fields, as a program: its events, repeats rolled into loops.

ti.capture (tinyad/capture.py) records what one call of a Python function does to fields: each
kernel launch (its variant, primal or adjoint or tangent, with its scalar arguments), each fill,
each element written from Python. A time loop records the same few events once per step, with the
step's scalars; `roll` finds such repeats and writes them as a `Loop` whose scalars are affine in
the step (t, t + 1, ..., or constant), so the program a backend runs (compile/sequence.py) is as
long as one step, not as all of them. Rolling changes only how the events are written down:
`unrolled(program)` gives back exactly the events recorded, scalar for scalar.

    capture of fwd_bwd: 2003 events as 5 lines
      fill U = 0.0
      loop 1000 times, r = 0, 1, ...:
        launch compute_U
        ...
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_PERIOD = 256     # the most events one step of a rolled loop may hold


@dataclass(frozen=True)
class Launch:
    """One kernel launch: `traced` (tinyad/kernel.py TracedKernel) run as `variant`."""
    kind = "launch"
    traced: Any
    variant: str
    scalars: tuple

    @property
    def key(self):
        return ("launch", id(self.traced), self.variant, tuple(map(_kind, self.scalars)))

    def moved(self, scalars):
        return Launch(self.traced, self.variant, scalars)

    def text(self) -> str:
        name = self.traced.ir.name + ("" if self.variant == "primal" else f" ({self.variant})")
        return f"launch {name}({', '.join(map(repr, self.scalars))})"


@dataclass(frozen=True)
class Fill:
    """field.fill(value), or a fill tinyad does (a Tape clearing gradients)."""
    kind = "fill"
    field: Any
    value: Any
    scalars = ()

    @property
    def key(self):
        return ("fill", id(self.field), self.value)

    def text(self) -> str:
        return f"fill {self.field.name} = {self.value!r}"


@dataclass(frozen=True)
class SetElement:
    """field[index] = value from Python; `value` the element's stored components, flat."""
    kind = "set"
    field: Any
    index: tuple
    value: tuple
    scalars = ()

    @property
    def key(self):
        return ("set", id(self.field), self.index, self.value)

    def text(self) -> str:
        value = self.value[0] if len(self.value) == 1 else list(self.value)
        return f"set {self.field.name}[{', '.join(map(str, self.index))}] = {value!r}"


@dataclass(frozen=True)
class CheckFinite:
    """A checked replay's look for NaN or infinity in `field` (tinyad/checkedreplay.py): where
    the capture's run looked, the replay looks; one found stops it, to run the call plainly."""
    kind = "finite"
    field: Any
    scalars: tuple = ()      # (lo, hi) of the rows looked at (a large gradient's); (): all

    @property
    def key(self):
        return ("finite", id(self.field), len(self.scalars))

    def moved(self, scalars):
        return CheckFinite(self.field, scalars)

    def text(self) -> str:
        return f"check {self.field.name}{_box_text(self.scalars)} is finite"


@dataclass(frozen=True)
class Copy:
    """A checked replay's copy of `field` into its buffer number `slot` (of the field's shape):
    the values the rule checker kept of it at this point of the capture's run, kept again. Its
    scalars are the box copied, (lo, hi) of each leading index flat (none: all of it), so that
    a time loop's copies of row t roll into one like its launches."""
    kind = "copy"
    field: Any
    slot: int
    scalars: tuple = ()

    @property
    def key(self):
        return ("copy", id(self.field), self.slot, len(self.scalars))

    def moved(self, scalars):
        return Copy(self.field, self.slot, scalars)

    @property
    def box(self) -> tuple:
        return tuple(zip(self.scalars[::2], self.scalars[1::2]))

    def text(self) -> str:
        where = "".join(f"[{lo}:{hi}]" for lo, hi in self.box)
        return f"copy {self.field.name}{where} (for the checks)"


def _box_text(scalars) -> str:
    return "".join(f"[{lo}:{hi}]" for lo, hi in zip(scalars[::2], scalars[1::2]))


@dataclass(frozen=True)
class Stash:
    """A checked replay's copy of a box of `field` (all of it: no box) into entry scalars[0]
    of its stash number `slot`: values a check of the capture's run copied there to compare
    later (tinyad/checkpredicates.py). Scalars: the entry, then (lo, hi) of each index, so
    that a time loop's stashes of row t roll like its launches."""
    kind = "stash"
    field: Any
    slot: int
    scalars: tuple

    @property
    def key(self):
        return ("stash", id(self.field), self.slot, len(self.scalars))

    def moved(self, scalars):
        return Stash(self.field, self.slot, scalars)

    def text(self) -> str:
        return f"stash {self.field.name}{_box_text(self.scalars[1:])} (for the checks)"


@dataclass(frozen=True)
class Compare:
    """A checked replay's compare of a box of `field` with a Stash's entry (scalars as its):
    `how` is "same" (equal, NaN to NaN) or "close" (within the rounding a recomputed step may
    differ by, tinyad/check/changes.py `differences`). Where the capture's run found them
    alike and the replay does not, the program stops."""
    kind = "compare"
    field: Any
    slot: int
    how: str
    scalars: tuple

    @property
    def key(self):
        return ("compare", id(self.field), self.slot, self.how, len(self.scalars))

    def moved(self, scalars):
        return Compare(self.field, self.slot, self.how, scalars)

    def text(self) -> str:
        return f"check {self.field.name}{_box_text(self.scalars[1:])} is as stashed"


@dataclass(frozen=True)
class Nonzero:
    """A checked replay's look for a nonzero in `field`, in any of the boxes of its scalars
    ((lo, hi) of each index, box after box; none: anywhere): where the answer is not
    `expect`, the capture's run's, the program stops."""
    kind = "nonzero"
    field: Any
    expect: bool
    scalars: tuple = ()

    @property
    def key(self):
        return ("nonzero", id(self.field), self.expect, len(self.scalars))

    def moved(self, scalars):
        return Nonzero(self.field, self.expect, scalars)

    def text(self) -> str:
        where = _box_text(self.scalars) if len(self.field.shape) else ""
        return f"check {self.field.name}{where} {'holds' if self.expect else 'lacks'} a nonzero"


@dataclass(frozen=True)
class Loop:
    """`count` repeats of `body` (its first step's events); in step r an event's scalar k is
    body[j].scalars[k] + r * deltas[j][k]."""
    count: int
    body: tuple
    deltas: tuple

    def step(self, r: int) -> list:
        return [event if not any(delta) else event.moved(tuple(
                    s + r * d for s, d in zip(event.scalars, delta)))
                for event, delta in zip(self.body, self.deltas)]


def _kind(value) -> str:
    return "int" if isinstance(value, int) else "float"


def roll(events: list) -> list:
    """The events as a program: runs of a repeated step become Loops (greedily, left to right,
    the period that covers most events at each place)."""
    numbering: dict = {}
    codes = np.fromiter((numbering.setdefault(e.key, len(numbering)) for e in events),
                        np.int64, len(events))
    program, i = [], 0
    while i < len(events):
        best = _best_repeat(events, codes, i)
        if best is None:
            program.append(events[i])
            i += 1
            continue
        period, count, deltas = best
        program.append(Loop(count, tuple(events[i:i + period]), deltas))
        i += period * count
    return program


def _best_repeat(events, codes, i):
    """-> (period, count, deltas) of the longest run of repeats starting at i, or None.
    `codes`: the events' keys as numbers (whole runs compare at once: a first call's 7000
    events rolled in 0.08 s compared slice by slice)."""
    best, n = None, len(codes)
    limit = min(MAX_PERIOD, (n - i) // 2)
    # (a period is a place where the event at i comes again)
    for period in (np.flatnonzero(codes[i + 1:i + limit + 1] == codes[i]) + 1).tolist():
        # steps 1, 2, ... equal step 0 while each event equals the one a period later
        differ = np.flatnonzero(codes[i:n - period] != codes[i + period:])
        alike = int(differ[0]) if differ.size else n - period - i
        count = min(alike // period + 1, (n - i) // period)
        if count < 2 or (best is not None and period * count <= best[0] * best[1]):
            continue           # (cannot cover more than the best so far: skip the scalars)
        deltas, count = _affine(events, i, period, count)
        if count >= 2 and (best is None or period * count > best[0] * best[1]):
            best = (period, count, deltas)
    return best


def _affine(events, i, period, count):
    """The scalars' step per repeat, and how many repeats follow it exactly (at least 1)."""
    first, second = events[i:i + period], events[i + period:i + 2 * period]
    deltas = tuple(tuple(b - a for a, b in zip(e.scalars, f.scalars))
                   for e, f in zip(first, second))
    steady = [not any(delta) for delta in deltas]     # (then s + r * 0 is s: compare at once)
    for r in range(2, count):
        step = events[i + r * period:i + (r + 1) * period]
        for e, delta, now, same in zip(first, deltas, step, steady):
            if (e.scalars != now.scalars if same else
                    any(s + r * d != v for s, d, v in zip(e.scalars, delta, now.scalars))):
                return deltas, r
    return deltas, count


def unrolled(program: list) -> list:
    """The events a program stands for, in order."""
    events = []
    for item in program:
        if isinstance(item, Loop):
            for r in range(item.count):
                events.extend(item.step(r))
        else:
            events.append(item)
    return events


def format_program(program: list, name: str) -> str:
    """The program as text, a line per event and loop."""
    count = len(unrolled(program))
    length = _length(program)
    lines = [f"capture of {name}: {_plural(count, 'event')} as {_plural(length, 'line')}"]
    for item in program:
        if not isinstance(item, Loop):
            lines.append("  " + item.text())
            continue
        lines.append(f"  loop {item.count} times, r = 0, 1, ...:")
        for event, delta in zip(item.body, item.deltas):
            text = event.text()
            if any(delta):
                steps = ", ".join(f"{d:+}" if d else "0" for d in delta)
                text += f"  (scalars step {steps} each r)"
            lines.append("    " + text)
    return "\n".join(lines)


def _length(program) -> int:
    return sum(1 + len(item.body) if isinstance(item, Loop) else 1 for item in program)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
