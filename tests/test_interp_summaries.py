"""Interp mode's per-element summaries when lanes hand them events to fold later
(interp/elementlog.py): the first and the latest event per element survive the waiting and the
folding, a launch outside a Tape starts from an empty scope, and a violation whose read is
several launches back (folded or still waiting) is reported with that read's line."""
import numpy as np
import pytest

import tinyad as ti
from tinyad.check.rules import (ReadThenOverwriteRuleError, ReplayDivergenceRuleError,
                                SecondWriteRuleError)
from tinyad.interp import elementlog
from tinyad.interp.elementlog import ElementLog


class _Field:
    """What ElementLog needs of a field: its host array."""

    def __init__(self, n):
        self.host_array = np.zeros(n, np.float32)


def _put(log, fld, flat, value, time, first_only):
    flat = np.asarray(flat, np.intp)
    log.put_many(fld, flat, "store", elementlog.LOCS.code("line 7"), "k", 1,
                 np.arange(len(flat), dtype=np.int32), np.full(len(flat), value, np.float32),
                 time, first_only)


@pytest.mark.parametrize("fold_at", [1, 1 << 20])     # folded at once / waiting until read
def test_first_and_latest_events_survive_waiting_and_folding(fold_at, monkeypatch):
    monkeypatch.setattr(elementlog, "FOLD_AT", fold_at)
    fld = _Field(6)
    first, latest = ElementLog(), ElementLog()
    for time, (flat, value) in enumerate([([0, 1, 1], 1.0), ([1, 2], 2.0), ([0, 5], 3.0)],
                                         start=10):
        _put(first, fld, flat, value, time, first_only=True)
        _put(latest, fld, flat, value, time, first_only=False)
    got_first = {i: first.get(fld, (i,)) for i in range(6)}
    assert [got_first[i] and (got_first[i].value, got_first[i].time) for i in range(6)] == \
        [(1.0, 10), (1.0, 10), (2.0, 11), None, None, (3.0, 12)]
    assert got_first[1].iteration == 1          # of the two lanes on element 1, the first
    got_latest = [latest.get(fld, (i,)) for i in range(6)]
    assert [e and (e.value, e.time) for e in got_latest] == \
        [(3.0, 12), (2.0, 11), (2.0, 11), None, None, (3.0, 12)]
    assert got_latest[0].kind == "store" and got_latest[0].loc == "line 7"


def test_columns_at_folds_only_events_that_may_meet_the_indices(monkeypatch):
    monkeypatch.setattr(elementlog, "FOLD_AT", 1 << 20)
    fld = _Field(100)
    log = ElementLog()
    _put(log, fld, [10, 11, 12], 1.0, 5, first_only=True)
    cols = log.columns_at(fld, np.array([50, 60]))        # apart: the events keep waiting
    assert cols is None and log.pending
    cols = log.columns_at(fld, np.array([12, 60]))        # may meet: folded
    assert not log.pending and list(np.flatnonzero(cols.time)) == [10, 11, 12]


def test_a_reusable_log_empties_what_it_recorded(monkeypatch):
    monkeypatch.setattr(elementlog, "FOLD_AT", 1)
    fld = _Field(8)
    log = ElementLog(reusable=True)
    _put(log, fld, [1, 3], 1.0, 5, first_only=True)
    log.put(fld, (6,), "read", None, "k", 1, None, 2.0, 6)        # element by element
    assert log.elements(fld) == [(1,), (3,), (6,)]
    log.empty()
    assert log.elements(fld) == [] and log.get(fld, (1,)) is None


def _time_stepped(steps):
    x = ti.field(ti.f32, shape=(steps + 1, 16), needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(16):
            x[t + 1, i] = ti.sin(x[t, i])        # the adjoint replays x[t, i]

    @ti.kernel
    def clobber(t: ti.i32):
        for i in range(16):
            x[t, i] = x[t, i] + 1.0

    @ti.kernel
    def total():
        for i in range(16):
            loss[None] += x[steps, i]

    x.from_numpy(np.random.default_rng(0).random((steps + 1, 16)).astype(np.float32))
    return x, loss, step, clobber, total


@pytest.mark.parametrize("fold_at", [1, 1 << 20])
def test_an_overwrite_several_launches_after_the_read_names_the_read(fold_at, monkeypatch):
    monkeypatch.setattr(elementlog, "FOLD_AT", fold_at)
    ti.init(mode="interp", check="error")
    x, loss, step, clobber, total = _time_stepped(6)
    with pytest.raises(SecondWriteRuleError) as caught:
        with ti.ad.Tape(loss=loss):
            for t in range(6):
                step(t)
            clobber(2)       # written by step(1), read by step(2), four launches back
    report = caught.value.report
    assert report.read.kernel == "step" and report.write.kernel == "clobber"
    assert report.element_text.startswith("x[2, ")


def test_launches_outside_a_tape_do_not_see_each_others_reads():
    ti.init(mode="interp", check="error")
    x, loss, step, clobber, total = _time_stepped(3)
    for t in range(3):
        step(t)
    clobber(1)           # another launch: step(1)'s read is not in its scope
    x.grad.fill(1.0)
    clobber.grad(1)      # (a launch's own violations are raised at its adjoint: none here)
    with pytest.raises(ReadThenOverwriteRuleError):
        with ti.ad.Tape(loss=loss):
            step(1)
            clobber(1)


def test_a_value_changed_behind_the_checker_is_caught_at_the_replay():
    ti.init(mode="interp", check="error")
    x, loss, step, clobber, total = _time_stepped(2)
    with pytest.raises(ReplayDivergenceRuleError) as caught:
        with ti.ad.Tape(loss=loss):
            step(0)
            step(1)
            total()
            x.host_array[0, 3] += 1.0     # under the checker's eyes: no Python-scope write
    assert caught.value.report.element_text == "x[0, 3]"



def test_the_event_table_keeps_only_rows_in_use(monkeypatch):
    """A row per access statement, compacted when most rows are no longer referenced
    (interp/elementlog.py): the events left are the same."""
    monkeypatch.setattr(elementlog, "FOLD_AT", 1)
    monkeypatch.setattr(elementlog, "COMPACT_EVENTS_AT", 64)
    fld = _Field(8)
    log = ElementLog()
    log.put(fld, (7,), "read", "line 3", "k", 2, 4, 5.0, 3)     # element by element
    for time in range(10, 1010):       # each statement replaces one of three elements' events
        _put(log, fld, [time % 3], float(time), time, first_only=False)
    assert len(log.events) <= 2 * 64
    assert [(e.value, e.time) for e in map(lambda i: log.get(fld, (i,)), range(3))] == \
        [(1008.0, 1008), (1009.0, 1009), (1007.0, 1007)]
    kept = log.get(fld, (7,))
    assert (kept.kind, kept.loc, kept.kernel, kept.launch, kept.iteration, kept.value,
            kept.time) == ("read", "line 3", "k", 2, 4, 5.0, 3)


def test_event_columns_widen_past_int16_rows(monkeypatch):
    monkeypatch.setattr(elementlog, "FOLD_AT", 1)
    fld = _Field(40000)
    log = ElementLog(reusable=True)
    for time in range(1, 33001):       # 33000 statements, each on its own element
        _put(log, fld, [time], 1.0, time, first_only=True)
    assert log.fields[fld].event.dtype == np.int32
    assert [log.get(fld, (i,)).time for i in (1, 32767, 33000)] == [1, 32767, 33000]
    log.empty()                        # the reusable log's record follows the wider column
    assert log.elements(fld) == []
