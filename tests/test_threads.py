"""compile/threads.py: parallel launches give up the cores other programs keep busy."""
from tinyad.compile import threads


def _governor(monkeypatch):
    """A governor on 2 cores whose clock, CPU time and /proc/stat are the test's."""
    g = threads.Governor()
    g.adaptive, g.most, g.threads, g.cpus, g.tick = True, 2, 2, {"cpu0", "cpu1"}, 0.01
    state = {"wall": 100.0, "own": 0.0, "ticks": 0}
    g.clock = lambda: state["wall"]
    g.cpu_time = lambda: state["own"]
    monkeypatch.setattr(g, "_busy_ticks", lambda: state["ticks"])
    chosen = []
    monkeypatch.setattr(g, "_set", lambda n: (chosen.append(n), setattr(g, "threads", n)))

    def window(own_cores, other_cores, seconds=threads.WINDOW_S):
        """`seconds` pass with this process and the others busy on so many cores; a launch."""
        state["wall"] += seconds
        state["own"] += own_cores * seconds
        state["ticks"] += round((own_cores + other_cores) * seconds / g.tick)
        g.before_launch()
        return g.threads
    g.before_launch()        # the first look: no window yet
    return g, window, chosen


def test_threads_follow_the_cores_other_programs_leave_free(monkeypatch):
    g, window, chosen = _governor(monkeypatch)
    assert window(2, 0) == 2                # alone: every thread
    assert window(1, 1) == 1                # a busy core beside us (or a second copy)
    assert window(1, 1) == 1
    assert window(1, 0.2) == 2              # a little background work: keep both
    assert window(2, 1.5) == 1              # our own threads are not "others"
    assert window(2, 0) == 2
    assert chosen == [1, 2, 1, 2]


def test_between_looks_and_after_a_pause_nothing_changes(monkeypatch):
    g, window, chosen = _governor(monkeypatch)
    assert window(1, 2, seconds=threads.WINDOW_S / 4) == 2   # not yet time to look
    assert window(1, 2, seconds=30) == 2                     # a stale window (the program idled)
    assert window(1, 2) == 1                                 # the next full window decides
    assert chosen == [1]


def test_a_fixed_thread_count_is_not_adapted(monkeypatch):
    monkeypatch.setenv("TINYAD_THREADS", "1")
    g = threads.Governor()
    assert not g.adaptive
    if g.most > 1:
        assert g.threads == 1
        g._set(g.most)           # leave numba's count as it was for the other tests
