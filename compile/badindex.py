"""Fast mode's bad-index flag: an index the IR cannot bound never touches memory outside its
field, and is reported at the user's line after the launch.

Unchecked, an index read from a field or computed from a float (0/0 cast to i32 is INT_MIN)
read another array's memory, wrapped -1 to the field's end, or ended the process with a
segmentation fault, where interp mode reports the index. Raising from compiled code is no
answer: numba's exception paths made mpm's cold compile 2.4 times slower (commit eacafa9). So:

* accesses whose indices the IR bounds get no code (tinyad/check/reached.py IndexProof): those
  inside the field for any arguments, and those `CertainBounds` settles before each launch
  (`LaunchBounds` here: once per set of integer argument values);
* every other access goes through `in_bounds<rank>(bad, site, array, i0, ...)`: the index
  itself when inside, else the field's first element, and the first such access of the launch
  recorded in the launch's `bad` array (site + 1, then the indices), claimed by a
  compare-and-swap so that two threads never mix their records. No exception path: on the
  CPU a numba intrinsic (a compare per index, one cold call), so it compiles into serial,
  pooled and parfors loops alike; for CUDA a device function;
* where a loop body indexes with a local plus static offsets (mpm's `grid[base + offset]`,
  nine offsets, three fields, and the adjoint's nine again), one range check of the local
  before the first of those accesses stands for their guards (tinyad/check/checkpoints.py):
  `record<k>(bad, site, v0, ...)` records the locals' values when it fails, and the host
  finds the access they put outside its field;
* after the launch the host reads `bad[0]` and raises the TinyadIndexError interp mode raises
  (compile/cpu.py's launcher), naming the field, the index, the shape and the user's line.

The launch has run to its end by then, its bad accesses sent to element 0. Without
`ti.init(debug=True)` fast mode keeps no copies to undo a launch (tinyad/undo.py: a copy of
every field written costs as much as a memory-bound kernel), so the fields hold what this one
wrote, as after any failure there; the next Tape starts clean. `debug=True` checks every index
(on the CPU by raising, compile/rt.py check_index; on CUDA with this flag), and a failed launch
or Tape puts the fields back.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir as llvm
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from tinyad.check.checkpoints import Checkpoint
from tinyad.check.reached import CertainBounds
from tinyad.core.errors import out_of_bounds, reached_out_of_bounds

MAX_RANK = 16          # in_bounds1 .. in_bounds16, record1 .. record16: names reserved
NAMES = tuple(f"{stem}{rank}" for stem in ("in_bounds", "record")
              for rank in range(1, MAX_RANK + 1))
PASSED_KEEP = 4096     # argument values LaunchBounds remembers as checked


def guard_name(rank: int) -> str:
    return f"in_bounds{rank}"


def guard_call(rank: int, bad: str, site: int, array: str, values: list, target: str) -> str:
    """The index tuple of one guarded access (an integer for one index), as source text."""
    if target == "cuda":
        return f"{guard_name(rank)}({bad}, {site}, {array}.shape, {', '.join(values)})"
    return f"{guard_name(rank)}({bad}, {site}, {array}, {', '.join(values)})"


def record_name(count: int) -> str:
    return f"record{count}"


def checkpoint_source(bad: str, site: int, names: list, types: list, ranges, target: str):
    """A checkpoint's lines (tinyad/check/checkpoints.py): if a local is outside its range,
    the locals recorded as site `site` and each clamped into its range."""
    inside = " and ".join(f"{lo} <= {n} <= {hi}" for n, (lo, hi) in zip(names, ranges))
    site_text = f"int64({site})" if target == "cuda" else str(site)
    lines = [f"if not ({inside}):  # a bad-index checkpoint (compile/badindex.py)",
             f"    {record_name(len(names))}({bad}, {site_text}, {', '.join(names)})"]
    lines += [f"    {n} = {t}(min(max({n}, {lo}), {hi}))"
              for n, t, (lo, hi) in zip(names, types, ranges)]
    return lines


def guard_source(ranks, target: str, decorator: str, record_ranks=()) -> str:
    """The `in_bounds<rank>` and `record<count>` helpers a generated module calls: on the CPU
    numba intrinsics imported from here (inlined as they are lowered: no call, no status
    check, no typing of a dispatcher at each site); for CUDA device functions under
    `decorator` (the simulator runs them as Python)."""
    if target != "cuda":
        names = ", ".join([guard_name(rank) for rank in sorted(ranks)]
                          + [record_name(count) for count in sorted(record_ranks)])
        return f"from tinyad.compile.badindex import {names}"
    return "\n\n".join([_device_guard(rank, decorator) for rank in sorted(ranks)]
                        + [_device_record(count, decorator) for count in sorted(record_ranks)])


def _device_record(count: int, decorator: str) -> str:
    params = ", ".join(f"v{k}" for k in range(count))
    lines = [decorator, f"def {record_name(count)}(bad, site, {params}):",
             '    """A failed checkpoint\'s locals, the launch\'s first record."""',
             "    if cuda.atomic.cas(bad, 0, int64(0), int64(site + 1)) == 0:"]
    lines += [f"        bad[{k + 1}] = int64(v{k})" for k in range(count)]
    return "\n".join(lines)


def _device_guard(rank: int, decorator: str) -> str:
    ks = range(rank)
    params = ", ".join(f"i{k}" for k in ks)
    inside = " and ".join(f"0 <= j{k} and j{k} < shape[{k}]" for k in ks)
    lines = [decorator, f"def {guard_name(rank)}(bad, site, shape, {params}):",
             '    """The index if inside `shape`, else element 0, the first such access '
             'recorded in `bad`\n    (compile/badindex.py)."""']
    lines += [f"    j{k} = int64(i{k})" for k in ks]
    lines += [f"    if {inside}:",
              f"        return {', '.join(f'j{k}' for k in ks)}",
              "    if cuda.atomic.cas(bad, 0, int64(0), int64(site + 1)) == 0:  # the first"]
    lines += [f"        bad[{k + 1}] = j{k}" for k in ks]
    lines.append(f"    return {', '.join('0' for _ in ks)}")
    return "\n".join(lines)


def _make_guard(rank: int):
    """in_bounds<rank>(bad, site, array, i0, ..): the index (unsigned: numba then adds no
    negative-index fix-up; a tuple for rank > 1) where inside `array`'s shape; else the
    field's first element, and the access recorded by `_recorder`'s function, called only
    then."""
    def typer(bad, site, array, indices):
        if not (isinstance(bad, types.Array) and bad.dtype == types.int64
                and isinstance(array, types.Array) and array.ndim == rank == len(indices)
                and isinstance(site, types.Integer)
                and all(isinstance(i, types.Integer) for i in indices)):
            return None
        result = types.uintp if rank == 1 else types.UniTuple(types.uintp, rank)
        return result(bad, site, array, *indices), _lower

    def _lower(context, builder, sig, args):
        bad_t, site_t, array_t, *index_t = sig.args
        bad_v, site_v, array_v, *index_v = args
        intp = context.get_value_type(types.intp)
        shape = cgutils.unpack_tuple(builder, context.make_array(array_t)(
            context, builder, array_v).shape, rank)
        values = [context.cast(builder, v, t, types.intp) for v, t in zip(index_v, index_t)]
        inside = cgutils.true_bit
        for value, extent in zip(values, shape):        # unsigned: a negative index is huge
            inside = builder.and_(inside, builder.icmp_unsigned("<", value, extent))
        with cgutils.if_unlikely(builder, builder.not_(inside)):
            record = context.make_array(bad_t)(context, builder, bad_v).data
            site_number = context.cast(builder, site_v, site_t, types.int64)
            builder.call(_recorder(builder.module, rank, intp), [record, site_number, *values])
        zero = llvm.Constant(intp, 0)       # a bad access goes to element (0, ..., 0)
        out = [builder.select(inside, value, zero) for value in values]
        if rank == 1:
            return out[0]
        return context.make_tuple(builder, sig.return_type, out)

    # numba's intrinsics take no *args: a typer with one parameter per index
    params = ", ".join(f"i{k}" for k in range(rank))
    namespace = {"typer": typer}
    exec(f"def {guard_name(rank)}(typingctx, bad, site, array, {params}):\n"  # noqa: S102
         f"    return typer(bad, site, array, ({params},))", namespace)
    return intrinsic(namespace[guard_name(rank)])


def _recorder(module, rank: int, intp):
    """The LLVM function (one per module and rank, cold, never inlined) that records a bad
    access: claims bad[0] with a compare-and-swap (0 -> site + 1), and if that was the first
    claim of the launch stores the indices after it. Out of line, so that each guarded access
    adds one call in one cold block (compile time)."""
    name = f"tinyad_bad_index_{rank}"
    if name in module.globals:
        return module.globals[name]
    fn = llvm.Function(module, llvm.FunctionType(llvm.VoidType(), [intp.as_pointer(), intp]
                                                 + [intp] * rank), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    record, site, *values = fn.args
    builder = llvm.IRBuilder(fn.append_basic_block("entry"))
    claim = builder.add(site, llvm.Constant(intp, 1))
    old = builder.extract_value(builder.cmpxchg(record, llvm.Constant(intp, 0), claim,
                                                "monotonic", "monotonic"), 0)
    with builder.if_then(builder.icmp_signed("==", old, llvm.Constant(intp, 0))):
        for k, value in enumerate(values):
            builder.store(value, builder.gep(record, [llvm.Constant(intp, k + 1)]))
    builder.ret_void()
    return fn


def _make_record(count: int):
    """record<count>(bad, site, v0, ..): a failed checkpoint's locals, recorded by
    `_recorder`'s function (the first record of the launch)."""
    def typer(bad, site, values):
        if not (isinstance(bad, types.Array) and bad.dtype == types.int64
                and isinstance(site, types.Integer)
                and all(isinstance(v, types.Integer) for v in values)):
            return None
        return types.none(bad, site, *values), _lower

    def _lower(context, builder, sig, args):
        bad_t, site_t, *value_t = sig.args
        bad_v, site_v, *value_v = args
        intp = context.get_value_type(types.intp)
        record = context.make_array(bad_t)(context, builder, bad_v).data
        values = [context.cast(builder, v, t, types.intp) for v, t in zip(value_v, value_t)]
        site_number = context.cast(builder, site_v, site_t, types.int64)
        builder.call(_recorder(builder.module, count, intp), [record, site_number, *values])
        return context.get_dummy_value()

    params = ", ".join(f"v{k}" for k in range(count))
    namespace = {"typer": typer}
    exec(f"def {record_name(count)}(typingctx, bad, site, {params}):\n"  # noqa: S102
         f"    return typer(bad, site, ({params},))", namespace)
    return intrinsic(namespace[record_name(count)])


for _rank in range(1, MAX_RANK + 1):
    globals()[guard_name(_rank)] = _make_guard(_rank)
    globals()[record_name(_rank)] = _make_record(_rank)


def bad_index_error(sites, bad: np.ndarray):
    """The TinyadIndexError for the access `bad` recorded (and `bad` cleared for the next
    launch): interp mode's words, at the access's line. For a checkpoint, the first access
    its recorded locals put outside its field."""
    site = sites[int(bad[0]) - 1]
    if isinstance(site, Checkpoint):
        found = site.first_outside(bad[1:1 + len(site.names)])
        bad[:] = 0
        if found is None:    # pragma: no cover  (a failed check always names one)
            raise AssertionError("a bad-index checkpoint failed with every access in bounds")
        return out_of_bounds(*found)
    rank = len(site.field.shape) + len(site.field.element_shape)
    index = tuple(int(i) for i in bad[1:1 + rank])
    bad[:] = 0
    return out_of_bounds(site.field, index, site.loc)


class LaunchBounds:
    """The accesses IndexProof leaves to a check before each launch (reached in every
    iteration, their index ends exact in the integer arguments): for each new set of argument
    values, the bounds error if one of them reaches outside its field."""

    def __init__(self, kernel, sites):
        self.kernel, self.sites = kernel, sites
        self.bounds = None              # (made at the first launch: it compiles each site's ends)
        self.names = [a.name for a in kernel.args]
        self.passed: set = set()
        self.seen: set = set()         # the launches' scalar tuples checked, where their integer
        # arguments are all of them, in order (a launcher asks this first: one lookup)

    def check(self, scalars) -> None:
        if self.bounds is None:
            self.bounds = CertainBounds(self.kernel, self.sites)
        key = tuple(int(scalars[i]) for i in self.bounds.positions)
        if key in self.passed:
            self._remember(scalars)
            return
        found = self.bounds.outside_at(key)
        if found is not None:
            site, dim, index = found
            given = ", ".join(f"{n}={v!r}" for n, v in zip(self.names, scalars))
            launch = f"this launch ({given})" if given else "this launch"
            raise reached_out_of_bounds(site.field, dim, index, launch, site.node.loc)
        if len(self.passed) >= PASSED_KEEP:
            self.passed.clear()
            self.seen.clear()
        self.passed.add(key)
        self._remember(scalars)

    def _remember(self, scalars) -> None:
        """`scalars` as checked, where they are the integer arguments in order (then they
        equal their key: the launcher's lookup in `seen` stands for the check)."""
        if self.bounds.positions == tuple(range(len(scalars))):
            self.seen.add(scalars)
