"""Compiling ahead: the adjoint kernels a backward pass will need, compiled by numba in a helper
process while this one compiles the others.

A cold start of a differentiable program is mostly numba compiling adjoint kernels (mpm: 11 of
17 s, one kernel at a time). A kernel's adjoint is queued at the kernel's first launch when it
touches a field with a gradient, and when the first adjoint is needed, those of any other
kernels launched so far, latest launch first (compile/backend.py). One helper process takes
the largest job queued (the longest compile first, so that the small ones left can be shared
out at the end); this process, needing an adjoint, takes its job if the helper has not started
it, and otherwise compiles queued jobs itself while it waits. The helper only fills the disk
cache (compile/cache.py); this process then loads the machine code from there. If the helper
fails, this process compiles everything, as without it. TINYAD_COMPILE_AHEAD=0 turns it off (it
is off on a single core).

    python -m compile.ahead      the helper: reads "<cache dir>\\t<stem>" lines, answers each
"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
from collections import deque

from tinyad.compile import cache, typingmemo

_cond = threading.Condition()
_queue: deque = deque()          # stems waiting, front first
_running: set = set()            # stems the helper is compiling
_sizes: dict = {}                # stem -> length of its source (what its compile will take)
_background: set = set()         # stems no one waits on yet (captured programs): taken last
_helper = None                   # the subprocess.Popen, started on first use
_broken = False
stats = {"by_helper": 0}


def enabled() -> bool:
    return (os.environ.get("TINYAD_COMPILE_AHEAD", "1") != "0" and (os.cpu_count() or 1) > 1
            and not _broken)


def submit(jobs, background: bool = False) -> None:
    """Queue (stem, source) pairs, in the order they will be needed, for the helper.
    `background`: nothing waits on them (compile/sequence.py's captured programs, which run as
    plain Python until ready): the helper takes them after every other job, and this process,
    while it waits for another, never takes them from it."""
    if not enabled():
        return
    directory = cache.cache_dir()
    with _cond:
        for stem, source in jobs:
            if (directory, stem) in _queue or stem in _running or cache.is_ready(stem):
                continue
            cache.publish(stem, source)
            _queue.append((directory, stem))
            _sizes[stem] = len(source)
            if background:
                _background.add(stem)
        if _queue:
            _start_helper()
            _cond.notify_all()


def need(stem: str) -> None:
    """Before this process loads `stem`: take its job back if the helper has not started it,
    else wait for the helper, compiling other queued jobs here meanwhile."""
    with _cond:
        job = next((j for j in _queue if j[1] == stem), None)
        if job is not None:
            _queue.remove(job)
            _background.discard(stem)
            return
    while True:
        with _cond:
            if stem not in _running:
                return
            waiting = [j for j in _queue if j[1] not in _background]
            other = waiting[-1] if waiting else None     # the job needed last
            if other is not None:
                _queue.remove(other)
        if other is None:
            with _cond:
                _cond.wait_for(lambda: stem not in _running)
            return
        _compile(*other)


def start() -> None:
    """Start the helper now, before any job (fast mode's ti.init): numba's import and first
    compile then happen on the other core while this process traces the first kernels (they
    delayed mpm's first adjoint by ~0.5 s). An idle helper only waits on its input."""
    if enabled():
        with _cond:
            _start_helper()


def _start_helper():
    global _helper
    if _helper is not None:
        return
    # The helper imports tinyad from where this process did (a checkout or site-packages).
    root = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["tinyad"].__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    _helper = subprocess.Popen([sys.executable, "-m", "tinyad.compile.ahead"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=env, bufsize=1)
    threading.Thread(target=_feed, name="tinyad-compile-ahead", daemon=True).start()
    atexit.register(_close)


def _close():
    """At exit: end of input tells the helper to stop after its current module. Exit does not
    wait long for it (an idle one, not at all): what it compiles only warms the cache, which is
    safe to interrupt (the cache publishes each file whole). Its stdout is closed only once it
    has ended: _feed may be blocked reading it, and closing a pipe another thread is reading
    waits for that read (exit after an error waited minutes for a large adjoint's compile)."""
    try:
        _helper.stdin.close()
    except OSError:
        pass
    try:
        _helper.wait(timeout=1.0 if _running else 0.0)
    except subprocess.TimeoutExpired:
        _helper.kill()
        _helper.wait()
    try:
        _helper.stdout.close()
    except OSError:
        pass


def _feed():
    """Hand the helper one job at a time (a daemon thread of this process)."""
    global _broken
    while True:
        with _cond:
            _cond.wait_for(lambda: _queue)
            directory, stem = job = max(_queue, key=lambda j: (j[1] not in _background,
                                                               _sizes.get(j[1], 0)))
            _queue.remove(job)
            _running.add(stem)
        try:
            _helper.stdin.write(f"{directory}\t{stem}\n")
            _helper.stdin.flush()
            ok = _helper.stdout.readline().strip() == f"done {stem}"
        except (OSError, ValueError):  # ValueError: exit closed the pipes (_close) meanwhile
            ok = False
        with _cond:
            _running.discard(stem)
            stats["by_helper"] += ok
            if not ok:      # the helper died (or exit closed its pipes): compile here from now on
                _broken = True
                _queue.clear()
            _cond.notify_all()
        if not ok:
            return


def _compile(directory: str, stem: str) -> None:
    """Compile one published module into the cache (here, or in the helper)."""
    with open(os.path.join(directory, stem + ".py"), encoding="utf-8") as f:
        cache.load(stem, f.read())


def _serve():
    """The helper process: compile each module named on stdin into the disk cache."""
    _warm_up()
    for line in sys.stdin:
        directory, stem = line.rstrip("\n").split("\t")
        os.environ["TINYAD_CACHE_DIR"] = directory
        try:
            _compile(directory, stem)
            print(f"done {stem}", flush=True)
        except Exception as exc:                      # noqa: BLE001 (reported, not raised)
            print(f"failed {stem}: {type(exc).__name__}", flush=True)


def _warm_up() -> None:
    """Pay numba's one-time costs (its compiler's set-up, the first compile) before any job."""
    from numba import njit, types  # noqa: PLC0415  (the helper's own import, not the user's)
    typingmemo.install()
    njit(types.float32(types.float32, types.int32), cache=False)(lambda x, i: x * i + 1.0)


if __name__ == "__main__":
    _serve()
