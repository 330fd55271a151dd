"""What the checker needs of a kernel, from its IR, and of each launch, from its integer
arguments: the boxes its replayed loads may read and its primal stores may write, and the fields
on which one launch may break a rule within itself (tinyad/check/replaycheck.py checks them)."""
from __future__ import annotations

from tinyad.check.boxes import box_contains, box_function, boxes_overlap
from tinyad.check.facts import kernel_facts
from tinyad.check.hazards import own_element_overwrites, unproven_fields
from tinyad.check.launches import RowSpans
from tinyad.check.reached import CertainBounds
from tinyad.check.rows import rows_of
from tinyad.check.zeroing import gradient_resets
from tinyad.check.scattercheck import ScatterCheck
from tinyad.core import ir
from tinyad.core.printer import format_expr


class Written:
    """A box a kernel's store may write in a launch (with these arguments), and how (the
    store's kind and line); or a Python-scope write (`access`; box None: the whole field)."""

    __slots__ = ("site", "box", "kind", "access")

    def __init__(self, site, box: tuple | None, kind: str, access=None):
        self.site, self.box, self.kind, self.access = site, box, kind, access

    def covers(self, element: tuple) -> bool:
        return self.box is None or all(lo <= i < hi for i, (lo, hi) in zip(element, self.box))


# A replayed read spanning at most this many leading indices (and not all) is filed by row
NARROW_ROWS = 16


class PlannedRead:
    """A box a replayed load reads in launches with given arguments: made once per kernel,
    site and box, so that launches share it (and the checker's lookups hash it by identity).
    `rows`: the leading indices it spans when few enough to file it by row (FieldReads), else
    None."""

    __slots__ = ("site", "field", "box", "slices", "rows", "span")

    def __init__(self, site, box: tuple):
        self.site, self.field, self.box, self.slices = site, site.field, box, box_slices(box)
        self.span = leading_span(box)
        lo, hi = box[0] if box else (0, 0)
        narrow = bool(box) and hi - lo <= NARROW_ROWS and (lo, hi) != (0, self.field.shape[0])
        self.rows = tuple(range(lo, hi)) if narrow else None


class LaunchPlan:
    """What the checker needs of one launch, given its integer arguments: computed once per
    kernel and argument values (a time-stepped program launches each step's kernels with the
    same few values again and again), so that a checked launch does no IR work.

    reads: the replayed loads' boxes as [PlannedRead], those another box of the same
    field contains left out (one copy covers them); writes: [Written]; loads: the box of each
    of the kernel's loads (KernelRegions.loads), None where it cannot run, as one tuple (a
    Python list of pairs per plan made thousands of objects the cyclic collector went through
    again and again); hazards: the fields on which the launch may break a rule within itself
    that only an element-by-element check can clear."""

    __slots__ = ("reads", "writes", "loads", "hazards", "more", "written_fields", "rows",
                 "names_and_rows", "row_source", "kernel", "read_spans", "spans_with_fixed",
                 "write_spans", "read_fields", "load_sites", "made_rows", "out_of_bounds")

    def __init__(self, kernel, reads, writes, loads, hazards, rows, load_sites,
                 out_of_bounds=None):
        self.reads, self.writes, self.loads = reads, writes, loads
        self.hazards, self.written_fields = hazards, kernel.written_fields
        # (a launch with in-launch hazards or of a gradient kernel written by hand takes the
        # checked launch's longer way: CheckedLaunch.run_forward, tinyad/checkedlaunch.py)
        self.more = bool(hazards) or kernel.hand_gradient
        # ({field: leading-index spans read}, {field: spans written}): launches.before_forward
        self.rows = rows
        self.names_and_rows = (kernel.names, rows)     # (what CheckedLaunch.plan_forward returns)
        # a launch's Launch.row_source: its rows, made once per plan when the order check
        # first asks (a recomputing sweep asks at every adjoint, for the same few plans)
        self.load_sites, self.made_rows = load_sites, None
        self.row_source = (self, None, _plan_rows)
        # What the checker's waiting reads need, per field: the leading indices this launch's
        # replayed reads span where the arguments move them (those no argument moves are the
        # kernel's `fixed_spans`), and those its writes span; each field's as one hull.
        self.kernel = kernel
        moving = [(r.field, r.span) for r in reads if r not in kernel.fixed_reads]
        self.read_spans = _hulls(moving)
        # (and with its kernel's fixed ones: what the first launch of the kernel adds while
        # none of its launches' reads wait)
        self.spans_with_fixed = _hulls([(fld, (lo, hi)) for fld, lo, hi in kernel.fixed_spans]
                                       + moving)
        self.write_spans = _hulls((w.site.field, leading_span(w.box)) for w in writes)
        self.read_fields = tuple({id(r.field): r.field for r in reads}.values())
        # (site, dimension, index) of an access this launch certainly makes outside its field
        # (tinyad/check/reached.py), or None
        self.out_of_bounds = out_of_bounds


class KernelRegions:
    """A kernel's replayed loads and primal writes as Sites, and their boxes per launch."""

    PLANS_KEPT = 1 << 12     # argument values remembered per kernel (a plan is a few hundred bytes)

    def __init__(self, traced):
        kernel = self.kernel_ir = traced.ir
        facts = kernel_facts(traced)
        replayed, self.hand_gradient = facts.replayed, facts.hand_gradient
        self.kernel_rows = rows_of(traced)
        sites = self.kernel_rows.sites     # (the same Site objects: a plan's boxes serve both)
        # the integer arguments the boxes depend on, and their positions (as the rows have them)
        self.args, self.positions = self.kernel_rows.args, self.kernel_rows.positions
        self.names = [a.name for a in kernel.args]
        self.loads = _distinct([s for s in sites
                                if isinstance(s.node, ir.Load) and s.field.role == "primal"])
        self.reads = _distinct([s for s in sites
                                if isinstance(s.node, ir.Load) and id(s.node) in replayed])
        self.writes = _distinct([s for s in sites if not isinstance(s.node, ir.Load)
                                 and s.field.role == "primal"], by_kind=True)
        resets = gradient_resets(kernel)
        self.grad_stores = [s for s in sites if isinstance(s.node, ir.Store)
                            and s.field.role == "grad" and id(s.node) not in resets]
        self.unproven = unproven_fields(kernel, replayed)
        # fields whose values before and after a launch decide its in-launch hazard (each
        # iteration overwriting its own element after a replayed read): their first replayed
        # read and first write, for the report
        self.own_overwrites = {
            fld: (next(s for s in sites if s.field is fld and isinstance(s.node, ir.Load)
                       and id(s.node) in replayed),
                  next(s for s in sites if s.field is fld and not isinstance(s.node, ir.Load)))
            for fld in own_element_overwrites(kernel, replayed)}
        self._scatter_checks: dict = {}    # field -> ScatterCheck or None
        self.written_fields = tuple({id(s.field): s.field for s in self.writes}.values())
        self._cache: dict = {}          # integer argument values -> LaunchPlan
        # a launch's scalar arguments -> LaunchPlan (CheckedLaunch.plan_forward looks here first)
        self.by_scalars: dict = {}
        self._functions: dict = {}     # id(site) -> its box function
        self._fixed: dict = {}         # id(site) -> its box, where no argument moves it
        self._moving: list | None = None    # [(id(site), box function)] of the others
        # The replayed reads of the fields whose read boxes no argument moves (a time-stepped
        # kernel's weights), planned once; the replayed read sites of the other fields.
        self.fixed_reads: list = []
        self.fixed_spans: tuple = ()      # their (field, leading-index hull lo, hi)
        self._moving_reads: list = []
        self._planned: dict = {}       # (id(site), box) -> its PlannedRead
        self._bounds: CertainBounds | None = None   # its accesses' certain index ends

    def scatter_check(self, kernel: ir.Kernel, fld):
        """The index-only check of `fld`'s stores (tinyad/check/scattercheck.py), or None."""
        if fld not in self._scatter_checks:
            self._scatter_checks[fld] = ScatterCheck.of(kernel, fld)
        return self._scatter_checks[fld]

    def arg_values(self, scalars: tuple) -> tuple:
        """The integer arguments the boxes depend on, in `box_function`'s order."""
        return tuple([int(scalars[i]) for i in self.positions])

    def box(self, site, values: tuple):
        return self._function(site)(*values)

    def _function(self, site):
        function = self._functions.get(id(site))
        if function is None:
            function = self._functions[id(site)] = box_function(
                site, site.field.shape, self.args)
        return function

    def plan(self, scalars: tuple) -> LaunchPlan:
        """The launch's plan (see LaunchPlan), computed on the first launch with these integer
        arguments. Looked up by the arguments as they came first (a time step's `t`), then by
        the integer ones the boxes depend on (a float argument may differ at each launch)."""
        try:
            found = self.by_scalars.get(scalars)
        except TypeError:      # an unhashable argument
            found = None
        if found is not None:
            return found
        values = self.arg_values(scalars)
        found = self._cache.get(values)
        if found is None:
            if len(self._cache) >= self.PLANS_KEPT:
                self._cache.clear()
            found = self._cache[values] = self._make_plan(values)
        if len(self.by_scalars) >= self.PLANS_KEPT:
            self.by_scalars.clear()
        try:
            self.by_scalars[scalars] = found
        except TypeError:
            pass
        return found

    def boxes(self, scalars: tuple):
        """-> (replayed read boxes, write boxes, every load's box, in-launch hazards)."""
        plan = self.plan(scalars)
        loads = [(s, b) for s, b in zip(self.loads, plan.loads) if b is not None]
        return [(r.site, r.box) for r in plan.reads], plan.writes, loads, plan.hazards

    def _make_plan(self, values: tuple) -> LaunchPlan:
        boxes = self._site_boxes(values)

        def box_of(site):
            key = id(site)
            if key not in boxes:
                boxes[key] = self.box(site, values)
            return boxes[key]

        def boxed(sites):
            return [(s, b) for s in sites if (b := box_of(s)) is not None]
        hazards = []
        for fld, (reads, writes, by_boxes) in self.unproven.items():
            if not by_boxes or any(boxes_overlap(r, w) for _, r in boxed(reads)
                                   for _, w in boxed(writes)):
                hazards.append(fld)
        # One Written per field, box and kind (the first store's, as a report names): the nine
        # atomics of a scatter's stencil may each write the whole grid.
        writes, seen = [], set()
        for site, b in boxed(self.writes):
            kind = "store" if isinstance(site.node, ir.Store) else "atomic_" + site.node.op
            if (id(site.field), b, kind) not in seen:
                seen.add((id(site.field), b, kind))
                writes.append(Written(site, b, kind))
        reads = [self._planned_read(s, b) for s, b in _covering(boxed(self._moving_reads))]
        reads += self.fixed_reads
        return LaunchPlan(self, reads, writes, tuple(box_of(s) for s in self.loads), hazards,
                          self.kernel_rows.of_boxes(box_of), self.loads,
                          self._out_of_bounds(values))

    def _out_of_bounds(self, values: tuple):
        """(site, dimension, index) of the first access a launch with these integer arguments
        certainly makes outside its field, or None (tinyad/check/reached.py)."""
        if self._bounds is None:
            self._bounds = CertainBounds(self.kernel_ir, self.kernel_rows.sites)
        return self._bounds.outside_at(values)

    def _site_boxes(self, values: tuple) -> dict:
        """id(site) -> the box it may touch in a launch with these arguments (None: it cannot
        run), for every site. Those no argument moves are worked out at the first plan, and so
        are the replayed reads of the fields only such sites read."""
        if self._moving is None:
            self._moving = []
            for site in self.kernel_rows.sites:
                function = self._function(site)
                if function.fixed:
                    self._fixed[id(site)] = function(*values)
                else:
                    self._moving.append((id(site), function))
            moved = {id(s.field) for s in self.reads if not self._function(s).fixed}
            self._moving_reads = [s for s in self.reads if id(s.field) in moved]
            fixed = [(s, self._fixed[id(s)]) for s in self.reads if id(s.field) not in moved]
            self.fixed_reads = [self._planned_read(s, b)
                                for s, b in _covering([p for p in fixed if p[1] is not None])]
            self.fixed_spans = _hulls((r.field, r.span) for r in self.fixed_reads)
        boxes = dict(self._fixed)
        for key, function in self._moving:
            boxes[key] = function(*values)
        return boxes

    def _planned_read(self, site, box) -> PlannedRead:
        key = (id(site), box)
        found = self._planned.get(key)
        if found is None:
            if len(self._planned) >= 4 * self.PLANS_KEPT:     # (a read made anew shares less)
                self._planned.clear()
            found = self._planned[key] = PlannedRead(site, box)
        return found


def leading_span(box: tuple) -> tuple:
    """The leading indices a box spans, (lo, hi); a 0-D field's box, (), its one element."""
    return box[0] if box else (0, 1)


def _hulls(pairs) -> tuple:
    """((field, lo, hi), ...): per field, the hull (lo, hi) of its spans, in first-seen order
    (flat: a launch's checks unpack one level, not two)."""
    hulls: dict = {}
    for fld, (lo, hi) in pairs:
        held = hulls.get(fld)
        hulls[fld] = (lo, hi) if held is None else (min(lo, held[0]), max(hi, held[1]))
    return tuple((fld, lo, hi) for fld, (lo, hi) in hulls.items())


def _distinct(sites, by_kind=False):
    """One site per field, element index (a vector's components share a box) and loops: the
    first in program order."""
    seen, out = set(), []
    for s in sites:
        key = (id(s.field), tuple(format_expr(e) for e in s.indices[:len(s.field.shape)]),
               tuple(map(id, s.loops)),
               (type(s.node), getattr(s.node, "op", None)) if by_kind else None)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def _covering(pairs):
    """Fewer (site, box) pairs covering the same elements, grouped by field and line in the
    order each group first appears. Boxes of one field and line that meet along one dimension
    are joined (a ti.static loop reading a weight matrix column by column: 30 boxes, one box),
    then a box another box of its field contains is left out (one copy of the larger covers
    both). Each replayed read costs a launch of a time-stepped kernel its filing, and
    DiffTaichi's rigid_body has 44 and 65 of them."""
    lines: dict = {}           # (field, line) -> [first site, [boxes]]
    for site, box in pairs:
        entry = lines.setdefault((id(site.field), site.node.loc), [site, []])
        entry[1].append(box)
    joined = [(site, box) for site, boxes in lines.values()
              for box in (boxes if len(boxes) == 1 else _joined(boxes))]
    fields: dict = {}          # field -> [(site, box)] not contained in another
    for pair in joined:
        kept = fields.setdefault(id(pair[0].field), [])
        if any(box_contains(b, pair[1]) for _, b in kept):
            continue
        kept[:] = [p for p in kept if not box_contains(pair[1], p[1])]
        kept.append(pair)
    survivors = {id(p) for kept in fields.values() for p in kept}
    return [p for p in joined if id(p) in survivors]


def _joined(boxes: list) -> list:
    """The boxes, with any two that differ in one dimension only and meet or overlap there
    replaced by their union (which is a box), until none are left to join."""
    boxes = list(dict.fromkeys(boxes))
    while len(boxes) > 1:
        before = len(boxes)
        for d in range(len(boxes[0])):
            rest: dict = {}          # the other dimensions -> this dimension's spans
            for box in boxes:
                rest.setdefault(box[:d] + box[d + 1:], []).append(box[d])
            boxes = []
            for other, spans in rest.items():
                spans.sort()
                lo, hi = spans[0]
                for start, stop in spans[1:]:
                    if start > hi:
                        boxes.append(other[:d] + ((lo, hi),) + other[d:])
                        lo = start
                    hi = max(hi, stop)
                boxes.append(other[:d] + ((lo, hi),) + other[d:])
        if len(boxes) == before:
            break
    return boxes


def regions_of(traced) -> KernelRegions:
    return traced.memos[KernelRegions]


def box_slices(box: tuple) -> tuple:
    return tuple(slice(lo, hi) for lo, hi in box)


def _plan_rows(plan: LaunchPlan, _) -> tuple:
    """(rows read, rows written) per field, for the order check (check/launches.py): the same
    for every launch of one plan (the check only reads them)."""
    if plan.made_rows is None:
        plan.made_rows = _rows(plan.load_sites, plan.loads, plan.writes)
    return plan.made_rows


def _rows(load_sites, loads, writes) -> tuple:
    read, wrote = {}, {}
    for site, box in zip(load_sites, loads):
        if box is not None:
            read.setdefault(site.field, RowSpans()).add(box)
    for w in writes:
        wrote.setdefault(w.site.field, RowSpans()).add(w.box)
    return read, wrote
