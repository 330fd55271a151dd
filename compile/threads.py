"""How many threads a parallel CPU launch gets: all of numba's, fewer when other programs keep
our cores busy.

Why. A parallel kernel is fork-join: every launch ends at a barrier that waits for its slowest
thread. When other processes want the same cores (a second copy of a benchmark, a test run, a
busy loop), one of our threads is often descheduled, and the launch then waits a scheduler time
slice (milliseconds) for it, on kernels that take microseconds; meanwhile our idle worker spins
on a core the other program needs. Two copies of the wave benchmark at once on a 2-core machine
ran 7-65x slower than one alone (issue 16). A launch with fewer threads than free cores has no
thread to wait for: beside other work it costs at most its serial time.

How. At most every WINDOW_S of wall time, at a launch, the governor reads how busy our cores
were since its last look (/proc/stat, the cores in this process's affinity) and subtracts this
process's own CPU time: the rest is other programs' work, in cores. Parallel launches then get
`cores - others` threads (rounded, at least 1, at most numba's thread count), set with
numba.set_num_threads (thread-local: for the thread that launches). Reading /proc/stat costs
20-200 us, once per window. Where /proc/stat is missing (not Linux) every launch gets all
threads. TINYAD_THREADS=N fixes the count (0 or unset: adaptive).
"""
from __future__ import annotations

import os
import time

WINDOW_S = 0.1        # how often (at most) the load is looked at; /proc/stat counts in 10 ms ticks


def _ticks_per_second() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return 100


class Governor:
    def __init__(self):
        from numba import config  # noqa: PLC0415  (numba is imported with the compiled code)
        self.most = max(int(config.NUMBA_NUM_THREADS), 1)
        try:
            self.cpus = {f"cpu{c}" for c in os.sched_getaffinity(0)}
        except (AttributeError, OSError):
            self.cpus = set()
        self.tick = 1 / _ticks_per_second()
        self.threads = self.most
        fixed = int(os.environ.get("TINYAD_THREADS") or 0)
        self.adaptive = not fixed and self.most > 1 and self._busy_ticks() is not None
        if fixed:
            self._set(min(fixed, self.most))
        self.clock, self.cpu_time = time.monotonic, time.process_time     # (tests replace them)
        self.next_look = 0.0
        self.last = None      # (wall s, busy ticks of our cores, own CPU s) at the last look

    def _busy_ticks(self) -> int | None:
        """Busy ticks of our cores since boot (user, nice, system, irq, softirq, steal)."""
        try:
            with open("/proc/stat", "rb") as f:
                text = f.read().decode()
        except OSError:
            return None
        busy = 0
        for line in text.splitlines():
            if not line.startswith("cpu"):
                break
            parts = line.split()
            if parts[0] in self.cpus:
                values = [int(v) for v in parts[1:9]]
                busy += sum(values) - values[3] - values[4]     # minus idle and iowait
        return busy

    def _set(self, threads: int) -> None:
        from numba import set_num_threads  # noqa: PLC0415
        set_num_threads(threads)
        self.threads = threads

    def before_launch(self) -> None:
        """Called before each parallel launch: adapts the thread count once per window."""
        if not self.adaptive:
            return
        now = self.clock()
        if now < self.next_look:
            return
        self.next_look = now + WINDOW_S
        busy = self._busy_ticks()
        sample = (now, busy, self.cpu_time())
        last, self.last = self.last, sample
        if busy is None or last is None or now - last[0] > 10 * WINDOW_S:
            return              # no window yet, or a stale one (the program was idle)
        wall = now - last[0]
        others = max((busy - last[1]) * self.tick - (sample[2] - last[2]), 0.0) / wall
        want = max(1, min(self.most, int(len(self.cpus) - others + 0.5)))
        if want != self.threads:
            self._set(want)


_governor: Governor | None = None


def governor() -> Governor:
    global _governor
    if _governor is None:
        _governor = Governor()
    return _governor
