"""The replayed reads a write must look at (tinyad/check/readwitness.py): a field's filed reads keep
the span of their leading indices, and a write of rows outside it looks at none of them. A read
filed beside others must still be found by the first write that changes it."""
import random

import numpy as np
import pytest

import tinyad as ti
from tinyad.check.boxes import boxes_overlap
from tinyad.check.readwitness import FieldReads, ReadIndex, ReplayedRead
from tinyad.check.regions import NARROW_ROWS, PlannedRead

N = 8


def _program(changed: bool):
    """Rows 1 and 3 of x are read by two launches awaiting their .grad(); the write of row 1
    files both reads, then rows 2 and 3 are written again (with new values where `changed`).
    -> the gradient of sum(x[3]^2) with respect to x[3], from total.grad()."""
    x = ti.field(ti.f64, shape=(5, N), needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)
    other = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def step(t: ti.i32):
        for i in range(N):
            x[t + 1, i] = x[t, i] * 2.0

    @ti.kernel
    def bump():
        for i in range(N):
            x[0, i] = x[0, i] + 1.0

    @ti.kernel
    def total():
        for i in range(N):
            loss[None] += x[3, i] ** 2

    @ti.kernel
    def peek():
        for i in range(N):
            other[None] += x[1, i] ** 2

    for i in range(N):
        x[0, i] = i + 1.0
    for t in range(3):
        step(t)
    peek()                  # its read of row 1 waits for peek.grad()
    total()                 # and this one's of row 3 for total.grad()
    if changed:
        bump()
    step(0)                 # row 1: near peek's read, so both reads are filed
    step(1)                 # row 2: neither read's
    step(2)                 # row 3: total's read, changed where `changed`
    loss.grad[None] = 1.0
    total.grad()
    return x.grad.to_numpy()[3]


def test_a_filed_read_is_found_by_the_write_that_changes_it(mode):
    with pytest.raises(ti.ReplayDivergenceRuleError, match=r"x\[3, 0\]"):
        _program(changed=True)


def test_rows_written_again_with_the_same_values_stay_silent(mode):
    grad = _program(changed=False)
    np.testing.assert_allclose(grad, 2 * 8.0 * (1.0 + np.arange(N)))     # x[3] = 8 x[0]; d/dx sum x^2 = 2x


class _Site:
    def __init__(self, fld):
        self.field = fld


class _Field:
    shape = (40, 6)


def test_the_span_of_filed_reads_holds_every_read_a_write_overlaps():
    """Random reads filed and retired, random writes: a write outside a field's span finds no
    live read overlapping it (by brute force), and `overlapping` finds exactly those that do."""
    rng = random.Random(35)
    fld = _Field()
    site = _Site(fld)
    for _ in range(200):
        index, live = ReadIndex(), []
        for _ in range(rng.randrange(1, 12)):
            lo = rng.randrange(0, 40)
            hi = min(40, lo + rng.choice([1, 2, NARROW_ROWS + 3]))
            read = ReplayedRead(None, PlannedRead(site, ((lo, hi), (0, 6))), 0)
            index.add(read)
            live.append(read)
        for read in rng.sample(live, rng.randrange(len(live))):
            index.retire(read)
            live.remove(read)
        held = index.fields.get(fld)
        if rng.random() < 0.3 and held is not None:
            held.compact()
        for _ in range(20):
            lo = rng.randrange(0, 40)
            box = ((lo, lo + rng.randrange(1, 4)), (0, 6))
            truth = {id(r) for r in live if boxes_overlap(box, r.box)}
            if held is None:
                assert not truth
                continue
            if box[0][1] <= held.lo or held.hi <= box[0][0]:
                assert not truth, (box, held.lo, held.hi)
            assert {id(r) for r in held.overlapping(box)} == truth


def test_a_0d_fields_read_spans_every_row():
    reads = FieldReads()

    class Scalar:
        shape = ()
    reads.add(ReplayedRead(None, PlannedRead(_Site(Scalar), ()), 0))
    assert reads.lo < 0 and reads.hi > 1      # (a 0-D write spans row 0: tinyad/check/regions.py)
