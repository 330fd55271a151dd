"""The check "computed before the Tape", shared by every backend that checks: a taped kernel
reads rows of a field computed from a parameter before the Tape (by a kernel outside any Tape,
or by an earlier Tape's kernels) and not computed again inside it (a warning: the gradient
stops at that field, which may be meant).

What the checker (tinyad/check/launches.py LaunchChecker) remembers for it, rows as spans of
leading indices (tinyad/check/spans.py):
  derived_outside_tape  field -> (kernel, store loc, source field, spans derived): what the
                        Tapes before this one (and kernels outside any Tape) derived
  derived_in_tape       the same for the current Tape's launches (None: not derived), which
                        become derived_outside_tape when it ends; spans None stand for the
                        rows the Tape wrote of the field (written_in_tape), while only
                        derived stores wrote it
  written_in_tape       field -> the spans taped launches wrote of it, as (lo, hi, the spans
                        before): the last span apart, the one a time step extends
  warned_in_tape        the fields warned about in this Tape (once each)
A long Tape of small launches runs this at every launch. A time step reads the row the step
before wrote, so each launch's part is a few comparisons in line for the one-span case, and
the rows a Tape derives are its written rows, not a second union per launch.
"""
from __future__ import annotations

from tinyad.check import rules
from tinyad.check.facts import kernel_facts
from tinyad.check.render import print_report
from tinyad.check.spans import ALL_ROWS, span_minus, span_union, spans_meet


def untaped_launch(checker, compiled, rows) -> None:
    """Outside a Tape: which fields (which rows of them) this kernel computes from a field that
    needs a gradient (which stores do is worked out once per kernel)."""
    derived_fields = checker.derived_outside_tape
    for target, derived in compiled.memos[derivations]:
        if derived is None:
            derived_fields.pop(target, None)
            continue
        spans = ALL_ROWS if rows is None else rows[1].get(target, ALL_ROWS)
        held = derived_fields.get(target)
        if held is not None:
            spans = span_union(held[3], spans)
            if spans is held[3] and held[:3] == derived:
                continue            # (a step again: nothing new to remember)
        derived_fields[target] = derived + (spans,)


def taped_launch(checker, compiled, facts, rows) -> None:
    """Inside a Tape, before a launch of `compiled` (`facts`: its KernelFacts): the reads
    check_reads checks, then the rows it writes and (outside a grad_replaced function, whose
    kernels' adjoints never run) what it derives, for the reads after it and the Tapes after
    this one. `rows`: ({field: spans read}, {field: spans written}) (a LaunchRows), or None:
    every row. The one-span case, a time step's row, in line: this runs at every launch of a
    long Tape."""
    try:
        steps = rows.steps      # (a LaunchRows' own, once made)
    except AttributeError:      # (None: every row)
        steps = None
    if steps is None:
        steps = _steps(compiled, facts, rows)
    written = checker.written_in_tape
    outside = checker.derived_outside_tape
    if outside:          # (only a python write takes one out inside a Tape)
        for fld, lo, hi in steps[0]:
            derived = outside.get(fld)
            if derived is None or fld in checker.warned_in_tape:
                continue
            if lo is not None:
                done = written.get(fld)
                if done is not None and done[0] <= lo and hi <= done[1]:
                    continue        # (the usual: rows a step of this Tape wrote)
                spans = derived[3]
                if len(spans) == 1 and (hi <= spans[0][0] or spans[0][1] <= lo):
                    continue        # (rows never derived)
            _check_read(checker, facts, compiled.ir.name, rows, fld, derived)
    into = checker.derived_in_tape
    custom = checker.in_custom_primal
    for target, entry, first, step in steps[1]:
        done = written.get(target)
        held = into.get(target, _UNLISTED)
        if custom:          # (a kernel's own entry too: its rows fixed before these)
            if held and held[3] is None:
                into[target] = (*held[:3], _spans(done))
        elif held is not entry:     # (the usual: the entry this kernel left, spans None)
            if entry is None:
                into[target] = None
            elif done is None and not held:     # (its first write in this Tape)
                into[target] = entry
            else:
                into[target] = _derived(held or None, entry, done, rows, target)
        if done is None:
            written[target] = first
        elif done is step[0]:       # (the usual: as this launch's rows found them before)
            written[target] = step[1]
        else:
            step[0] = done
            written[target] = step[1] = _written_after(done, step[2], step[3], rows, target)


_UNLISTED = ()      # (derived_in_tape has no entry: not None, which a kernel sets)


def _written_after(done: tuple, lo, hi, rows, target) -> tuple:
    """written_in_tape's entry for `target` once a launch with these `rows` wrote it (`lo`,
    `hi`: their one span, None: more), where it was `done`. A function of `done` alone for
    given rows: each write of taped_launch's steps keeps its latest as [done, the entry
    after], so a time step launched again in the next Tape, which finds the same `done` the
    same step before it left, costs one comparison (the rows a Tape writes are the same from
    one Tape to the next)."""
    if lo is not None and done[0] <= lo <= done[1]:     # (a step after the last)
        return (done[0], hi, done[2]) if hi > done[1] else done
    return _packed(span_union(_spans(done), _rows_of(rows, 1, target)))


def wrote_every_row(checker, fld) -> None:
    """Inside a Tape: Python scope wrote all of `fld` (a copy_from)."""
    checker.written_in_tape[fld] = _packed(ALL_ROWS)


def _packed(spans) -> tuple:
    """written_in_tape's form of `spans`: (lo, hi) of the last, and the spans before it."""
    return (*spans[-1], spans[:-1])


def _spans(done) -> tuple:
    """The spans written_in_tape's entry `done` stands for."""
    return (*done[2], done[:2])


def check_reads(checker, facts, kernel_name: str, rows) -> None:
    """Inside a Tape: warn when a launch (`facts`: its KernelFacts, or lostgrads.CopyFacts)
    reads rows of a field derived before the Tape that no taped launch wrote yet."""
    for fld in facts.loads_differentiable:
        derived = checker.derived_outside_tape.get(fld)
        if derived is not None and fld not in checker.warned_in_tape and \
                fld not in facts.loaded_own:    # (it reads only what it wrote itself)
            _check_read(checker, facts, kernel_name, rows, fld, derived)


def _check_read(checker, facts, kernel_name: str, rows, fld, derived) -> None:
    done, read = checker.written_in_tape.get(fld), _rows_of(rows, 0, fld)
    stale = derived[3] if done is None else span_minus(derived[3], _spans(done))
    if not spans_meet(stale, read):
        return
    checker.warned_in_tape.add(fld)
    kernel, loc, source, _ = derived
    print_report(rules.computed_before_tape(
        field=fld.name, source=source.name, write_loc=loc, kernel=kernel,
        taped_kernel=kernel_name, read_loc=facts.first_load[fld]))


def _rows_of(rows, which: int, fld) -> tuple:
    return ALL_ROWS if rows is None else rows[which].get(fld, ALL_ROWS)


def _steps(compiled, facts, rows) -> tuple:
    """((field, lo, hi) per field with a gradient the launch reads, not only what it wrote
    itself; (target, its taped_derivations entry, its rows as written_in_tape has them,
    [written_in_tape's entry before, after its latest launch, lo, hi]) per float field it
    writes), lo and hi the rows' one span (None: more, or every row), made once per `rows` (a
    LaunchRows, one per time step, kept with them) or per kernel where the rows are not
    known."""
    if rows is None:
        return compiled.memos[_steps_every_row]
    if rows.steps is not None:       # (rows worked out just now, alike an earlier launch's)
        return rows.steps
    rows.steps = (
        tuple((fld, *_one_span(rows[0].get(fld, ALL_ROWS))) for fld in facts.loads_differentiable
              if fld not in facts.loaded_own),
        tuple((target, entry, _packed(spans), [None, None, *_one_span(spans)])
              for target, entry in compiled.memos[taped_derivations]
              for spans in (rows[1].get(target, ALL_ROWS),)))
    return rows.steps


def _steps_every_row(compiled) -> tuple:
    facts = kernel_facts(compiled)
    return (tuple((fld, None, None) for fld in facts.loads_differentiable
                  if fld not in facts.loaded_own),
            tuple((target, entry, _packed(ALL_ROWS), [None, None, None, None])
                  for target, entry in compiled.memos[taped_derivations]))


def _one_span(spans) -> tuple:
    return spans[0] if len(spans) == 1 and spans is not ALL_ROWS else (None, None)


def _derived(held, entry: tuple, done, rows, target) -> tuple:
    """derived_in_tape's new entry for `target`, which a derived store of `entry` (spans None)
    writes (`rows`: the launch's), where `held` was; `done`: the rows the Tape wrote of it
    before this launch."""
    if held is not None:
        if held[3] is None:         # another kernel derived it: its rows go on adding up
            return entry
        return (*entry[:3], span_union(held[3], _rows_of(rows, 1, target)))
    if done is not None:    # (written before, by a store that derived nothing or left no
        return (*entry[:3], _rows_of(rows, 1, target))   # entry, or a python write between)
    return entry


def taped_derivations(compiled) -> tuple:
    """(target, (kernel name, the store's loc, a field with a gradient it is computed from,
    None) or None) per float field the kernel writes, once per kernel (its memos): the entry
    taped_launch puts in derived_in_tape, the same object at every launch."""
    return tuple((target, None if derived is None else (*derived, None))
                 for target, derived in compiled.memos[derivations])


def derivations(compiled) -> tuple:
    """(target, (kernel name, the store's loc, a field with a gradient it is computed from) or
    None) per float field the kernel writes, once per kernel (its memos)."""
    found = {}
    for target, sources, loc in kernel_facts(compiled).dependencies:
        differentiable = [s for s in sources if s is not target and s.has_grad]
        found[target] = (compiled.ir.name, loc, differentiable[0]) if differentiable else None
    return tuple(found.items())


def tape_ends(checker) -> None:
    """The Tape stops recording: what its launches derived is what the next Tape finds."""
    outside, written = checker.derived_outside_tape, checker.written_in_tape
    for fld, derived in checker.derived_in_tape.items():
        if derived is None:
            outside.pop(fld, None)
        elif derived[3] is None:
            done = written[fld]
            outside[fld] = (*derived[:3], (*done[2], done[:2]))     # (_spans, in line)
        else:
            outside[fld] = derived
    checker.derived_in_tape = {}


def in_tape(checker, fld):
    """derived_in_tape's entry for `fld` with its rows (None: not derived in this Tape)."""
    derived = checker.derived_in_tape.get(fld)
    if derived is None or derived[3] is not None:
        return derived
    return (*derived[:3], _spans(checker.written_in_tape[fld]))
