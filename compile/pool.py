"""The thread pool that runs a CPU kernel's parallel loops, chunk by chunk.

Why not numba's `parallel=True`: its parfors pass and the gufunc it lowers cost 0.5 s of compile
time for even the smallest loop, and several seconds for a large body (mpm's p2g_grad: 17 s
against 4 s compiled serially: the body is typed, lowered and optimized by LLVM twice). Here a
parallel loop is compiled serially as `seg(chunk, chunks, ...)`, which runs iterations
[chunk * n // chunks, (chunk + 1) * n // chunks), with `nogil=True`
(compile/pooledsource.py); `run` calls it for every chunk, on this thread and on the pool's
persistent worker threads, and returns when all are done.

The thread count is compile/threads.py's (numba's count, fewer when other programs keep our
cores busy). Whether a loop uses the threads at all is measured per segment (`ThreadChoice`):
handing chunks to the workers costs tens of microseconds a launch (waking a thread, taking the
GIL to call the segment), more than a small loop saves. Chunks are claimed, not assigned: a
worker that the OS wakes late (another program has the core) finds them taken by the launching
thread, so a launch never waits for a descheduled thread that has not started. Results do not
depend on who runs a chunk: its iterations, its per-chunk sums and the order they are added up
are fixed by its number.
"""
from __future__ import annotations

import itertools
import os
import threading
import time
from queue import SimpleQueue

import numpy as np
from numba import njit

from tinyad.compile import threads


class _Launch:
    """One launch's chunks: whoever is free claims the next one (this thread and the woken
    workers), so a worker the OS is slow to wake costs nothing: this thread runs its chunks."""
    __slots__ = ("fn", "chunks", "args", "claims", "finished", "lock", "done", "error")

    def __init__(self, fn, chunks, args):
        self.fn, self.chunks, self.args = fn, chunks, args
        self.claims = itertools.count()      # next() is atomic under the GIL
        self.finished = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.error = None

    def work(self) -> None:
        ran = 0
        for chunk in self.claims:
            if chunk >= self.chunks:
                break
            try:
                self.fn(chunk, self.chunks, *self.args)
            except BaseException as exc:      # noqa: BLE001  raised by the launching thread
                self.error = self.error or exc
            ran += 1
        if ran:
            with self.lock:
                self.finished += ran
                if self.finished == self.chunks:
                    self.done.set()


class ChunkPool:
    def __init__(self, workers: int):
        self.pid = os.getpid()
        self.inboxes = []
        for k in range(workers):
            inbox: SimpleQueue = SimpleQueue()
            threading.Thread(target=self._work, args=(inbox,), name=f"tinyad-pool-{k}",
                             daemon=True).start()
            self.inboxes.append(inbox)

    @staticmethod
    def _work(inbox):
        while True:
            inbox.get().work()

    def run(self, fn, chunks: int, args: tuple, nthreads: int) -> None:
        nthreads = min(nthreads, chunks, len(self.inboxes) + 1)
        if nthreads <= 1:
            for chunk in range(chunks):
                fn(chunk, chunks, *args)
            return
        launch = _Launch(fn, chunks, args)
        for k in range(1, nthreads):
            self.inboxes[k - 1].put(launch)
        launch.work()
        launch.done.wait()
        if launch.error is not None:
            raise launch.error


class ThreadChoice:
    """Threads or not, for one segment at one thread count, by measurement. Its first launches
    alternate (all chunks on this thread, then on the pool) and the faster of each way's best
    time wins; the probe is repeated every REPROBE launches, as sizes and load change. Measured
    on a 2-core VM: wave's 256^2 step takes 38 us a launch alone and 73 us on 2 threads, gravity
    N=1024's pair loop 1.1 ms alone and 0.6 ms on 2. Either way the chunks, and so the results,
    are the same."""
    PROBES = 3            # timed launches each way
    REPROBE = 1000        # launches between probes
    __slots__ = ("launches", "best", "threaded")

    def __init__(self):
        self.launches = 0
        self.best = [float("inf"), float("inf")]    # seconds: [alone, threaded]
        self.threaded = True

    def run(self, pool_, fn, chunks: int, args: tuple, nthreads: int) -> None:
        phase = self.launches % self.REPROBE
        self.launches += 1
        if phase >= 2 * self.PROBES:
            pool_.run(fn, chunks, args, nthreads if self.threaded else 1)
            return
        if phase == 0:
            self.best = [float("inf"), float("inf")]
        threaded = phase % 2
        start = time.perf_counter()
        pool_.run(fn, chunks, args, nthreads if threaded else 1)
        self.best[threaded] = min(self.best[threaded], time.perf_counter() - start)
        if phase == 2 * self.PROBES - 1:
            self.threaded = self.best[1] < self.best[0]


_choices: dict = {}      # (segment, thread count[, size]) -> its ThreadChoice
_pool: ChunkPool | None = None


def pool() -> ChunkPool:
    global _pool
    if _pool is None or _pool.pid != os.getpid():     # threads do not survive a fork
        _pool = ChunkPool(threads.governor().most - 1)
    return _pool


def run(fn, chunks, *args, key=None) -> None:
    """Run `fn(chunk, chunks, *args)` for every chunk, in parallel where that is faster.
    `chunks` None: one per thread (a loop whose chunks keep no per-chunk state). `key` tells
    apart launches of one function whose sizes differ (default: the function)."""
    nthreads = threads.governor().threads
    chunks = nthreads if chunks is None else chunks
    if nthreads <= 1 or chunks <= 1:
        run_serially(fn, chunks, *args)
        return
    choice_key = (fn if key is None else key, nthreads)
    choice = _choices.get(choice_key)
    if choice is None:
        choice = _choices[choice_key] = ThreadChoice()
    choice.run(pool(), fn, chunks, args, nthreads)


def run_serially(fn, chunks, *args) -> None:
    """The same chunks, all on this thread (a loop with too little work for threads)."""
    for chunk in range(chunks or 1):
        fn(chunk, chunks or 1, *args)


@njit(nogil=True, cache=True)
def _add_copies_chunk(chunk, chunks, flat, rows):
    n = flat.shape[0]
    for i in range(chunk * n // chunks, (chunk + 1) * n // chunks):
        k = i & 0x7FFFFFFFFFFFFFFF      # >= 0: lets LLVM drop numpy's negative-index check
        total = flat[k]
        for t in range(rows.shape[0]):
            total += rows[t, k]
        flat[k] = total


def add_copies(array: np.ndarray, copies: np.ndarray) -> None:
    """array += the sum of its per-chunk copies (copies[t] is chunk t's), in chunk order."""
    run(_add_copies_chunk, None, array.reshape(-1), copies.reshape(copies.shape[0], -1),
        key=(_add_copies_chunk, array.size))


# A per-chunk copy buffer kept between launches, at most this large: a larger one is allocated
# at each launch (its fresh pages weigh little next to the work that fills it).
SCRATCH_KEPT = 16 << 20
_scratch = threading.local()      # the launching thread's buffers: name -> array


def chunk_copies(name: str, array: np.ndarray, chunks: int) -> np.ndarray:
    """Zeroed per-chunk copies of `array`, shape (chunks, *array.shape), for the generated
    variable `name`, in a buffer kept between launches. A fresh buffer each launch first
    touches each of its pages, and where other allocations and frees (the rule checker's
    copies) have moved the heap, those pages are new to the process: mpm's p2g, a 256 kB grid
    copied per chunk, took 400 us a launch instead of 250. Launches on one thread never
    overlap, so kernels may share a name's buffer."""
    buffers = getattr(_scratch, "buffers", None)
    if buffers is None:
        buffers = _scratch.buffers = {}
    key = (name, chunks, array.shape, array.dtype)
    found = buffers.get(key)
    if found is not None:
        found.fill(0)
        return found
    made = np.zeros((chunks,) + array.shape, array.dtype)
    if made.nbytes <= SCRATCH_KEPT:
        buffers[key] = made
    return made
