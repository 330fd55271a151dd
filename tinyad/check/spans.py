"""Spans of leading indices (the rows of a time-indexed field a launch reads or writes), as
sorted, disjoint (lo, hi) pairs, hi exclusive."""
from __future__ import annotations

ALL_ROWS = ((0, 1 << 62),)


def span_union(spans, more) -> tuple:
    if not spans:
        return tuple(more)
    if len(more) == 1 and spans[-1][0] <= more[0][0] <= spans[-1][1]:   # the common case:
        lo, hi = spans[-1]                                             # a step after the last
        return spans if more[0][1] <= hi else (*spans[:-1], (lo, more[0][1]))
    merged: list = []
    for lo, hi in sorted((*spans, *more)):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return tuple(merged)


def span_minus(spans, cut) -> tuple:
    out = []
    for lo, hi in spans:
        for c_lo, c_hi in cut:
            if c_hi <= lo or c_lo >= hi:
                continue
            if c_lo > lo:
                out.append((lo, c_lo))
            lo = max(lo, c_hi)
            if lo >= hi:
                break
        if lo < hi:
            out.append((lo, hi))
    return tuple(out)


def spans_meet(a, b) -> bool:
    return any(lo1 < hi2 and lo2 < hi1 for lo1, hi1 in a for lo2, hi2 in b)


class RowSpans:
    """The leading indices a launch may have read or written of one field, as spans (its plan
    knows boxes, not elements). `a & b` is true when they share a row, like two sets of rows."""

    def __init__(self):
        self.spans: set = set()

    def add(self, box: tuple) -> None:
        self.spans.add(box[0] if box else (0, 1))

    def __and__(self, other) -> bool:
        if not isinstance(other, RowSpans):
            return False
        return any(lo1 < hi2 and lo2 < hi1 for lo1, hi1 in self.spans for lo2, hi2 in other.spans)
