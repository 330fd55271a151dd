"""Interp mode tells the user when a program is slow: a one-time warning with the size, and
progress lines during long runs, so the screen never stays blank for minutes.

  * the first launch that takes LONG_LAUNCH_S or more, or the run passing LONG_RUN_S in all,
    warns once (on stderr): the kernel, its fields' size, the time it took, and that checked
    fast mode (`ti.init(mode="fast")`) runs the same checks at compiled speed;
  * when stderr is a terminal, once a run has taken PROGRESS_AFTER_S, a line every
    PROGRESS_EVERY_S: launches so far, the time, the time per launch, and, while forward
    launches wait for a backward pass, an estimate of it: it replays each taped launch, which
    costs about as much again, so the forward launches' time since the last backward pass,
    less what adjoint launches have taken since (none once it has run: an optimisation loop's
    earlier Tapes are done).
"""
from __future__ import annotations

import sys

from tinyad.core import ir

LONG_LAUNCH_S = 1.0
LONG_RUN_S = 20.0
PROGRESS_AFTER_S = 5.0
PROGRESS_EVERY_S = 5.0


def _say(text: str) -> None:
    print(f"[tinyad] {text}", file=sys.stderr, flush=True)


class Progress:
    """One per interp backend (one ti.init)."""

    def __init__(self):
        self.launches = 0
        self.busy = 0.0             # seconds spent in launches
        self.backward_owed = 0.0    # forward seconds a backward pass would replay (see above)
        self.warned = False
        self.next_line = PROGRESS_AFTER_S

    def launched(self, traced, seconds: float, variant: str = "primal") -> None:
        self.launches += 1
        self.busy += seconds
        if variant == "adjoint":
            self.backward_owed = max(self.backward_owed - seconds, 0.0)
        elif variant == "primal":
            self.backward_owed += seconds
        if not self.warned and (seconds >= LONG_LAUNCH_S or self.busy >= LONG_RUN_S):
            self.warned = True
            _say(size_warning(traced, seconds, self.busy, self.launches))
        if self.busy >= self.next_line:
            self.next_line = self.busy + PROGRESS_EVERY_S   # (not asked again at each launch)
            if not sys.stderr.isatty():
                return
            per = self.busy / self.launches
            owed = (f"; a backward pass over the taped ones takes about "
                    f"{self.backward_owed:.0f} s more" if self.backward_owed >= 1.0 else "")
            _say(f"interp: {self.launches} launches, {self.busy:.0f} s so far ({per:.3f} s per "
                 f"launch{owed})")


def size_warning(traced, seconds: float, busy: float, launches: int) -> str:
    fields = ir.fields_of(traced.ir.body)
    elements = sum(ir.array_size(f) for f in fields)
    if seconds >= LONG_LAUNCH_S:
        what = (f"kernel {traced.ir.name} (fields of {elements:,} elements) took "
                f"{seconds:.1f} s, {busy:.1f} s in {launches} launches so far")
    else:       # many quick launches add up
        what = (f"its {launches} launches have taken {busy:.1f} s so far (the latest: kernel "
                f"{traced.ir.name}, fields of {elements:,} elements)")
    return (f"interp mode is slow for this program: {what}; a program like it may take minutes "
            "here. Checked fast mode runs the same autodiff checks at compiled speed: "
            "ti.init(mode=\"fast\").")
