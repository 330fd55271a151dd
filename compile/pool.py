"""The thread pool that runs a CPU kernel's parallel loops, chunk by chunk.

Why not numba's `parallel=True`: its parfors pass and the gufunc it lowers cost 0.5 s of compile
time for even the smallest loop, and several seconds for a large body (mpm's p2g_grad: 17 s
against 4 s compiled serially: the body is typed, lowered and optimized by LLVM twice). Here a
parallel loop is compiled serially as `seg(chunk, chunks, ...)`, which runs iterations
[chunk * n // chunks, (chunk + 1) * n // chunks), with `nogil=True`
(compile/pooledsource.py); `run` calls it for every chunk, on this thread and on the pool's
persistent worker threads, and returns when all are done.

The thread count is compile/threads.py's (numba's count, fewer when other programs keep our
cores busy). Chunks are claimed, not assigned: a worker that the OS wakes late (another program
has the core) finds them taken by the launching thread, so a launch never waits for a
descheduled thread that has not started. Results do not depend on who runs a chunk: its
iterations, its per-chunk sums and the order they are added up are fixed by its number.
"""
from __future__ import annotations

import itertools
import os
import threading
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


_pool: ChunkPool | None = None


def pool() -> ChunkPool:
    global _pool
    if _pool is None or _pool.pid != os.getpid():     # threads do not survive a fork
        _pool = ChunkPool(threads.governor().most - 1)
    return _pool


def run(fn, chunks, *args) -> None:
    """Run `fn(chunk, chunks, *args)` for every chunk, in parallel. `chunks` None: one per
    thread (a loop whose chunks keep no per-chunk state)."""
    nthreads = threads.governor().threads
    pool().run(fn, nthreads if chunks is None else chunks, args, nthreads)


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
    run(_add_copies_chunk, None, array.reshape(-1), copies.reshape(copies.shape[0], -1))
