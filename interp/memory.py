"""Global memory as the interpreter sees it: every access bounds-checked (subclasses keep the
values elsewhere: wider copies, sympy objects, a custom gradient check's access sets).

Each access names its `site`: the IR node doing it (a Load, Store or AtomicOp), whose `.loc` is
the user's source line."""
from __future__ import annotations

from tinyad.core import ir
from tinyad.core.errors import out_of_bounds
from tinyad.core.ops import TABLE

# The ufunc of each atomic op (core/ir.py ATOMIC_OPS: the op table's), for one element and for
# lanes (`.at`)
ATOMIC_UFUNCS = {op: TABLE[op].eval for op in ir.ATOMIC_OPS}


class Memory:
    """Plain memory: numpy arrays, checked indices. Subclasses that keep values elsewhere
    (wider copies, sympy objects) override `array`."""

    def array(self, field):
        """The array holding `field`'s elements (interp keeps fields in host storage, the
        default: the host array itself, without `field.data`'s storage round trip)."""
        return field.host_array

    def check(self, field, index, site):
        # numpy rejects indices past the end; negative ones it would wrap, so test them here
        if index and min(index) < 0:
            raise out_of_bounds(field, index, site.loc)

    def load(self, field, index, site):
        self.check(field, index, site)
        try:
            return self.array(field)[index]
        except IndexError:
            raise out_of_bounds(field, index, site.loc) from None

    def store(self, field, index, value, site):
        self.check(field, index, site)
        try:
            self.array(field)[index] = value
        except IndexError:
            raise out_of_bounds(field, index, site.loc) from None

    def atomic(self, op, field, index, value, site):
        """Apply `op` in place; returns the old value, as ti.atomic_* do."""
        old = Memory.load(self, field, index, site)   # not a read of its own: no subclass hook
        data = self.array(field)
        data[index] = ATOMIC_UFUNCS[op](old, value)
        return old

    def begin_iteration(self, loop, index):
        """Iteration `index` of a parallel loop starts (None: the loop has ended). The NaN
        locator's memory (interp/nanwatch.py) names the iteration a value went bad in by it."""
