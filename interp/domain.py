"""Value domains of the interpreter: what a value is, and how an op or a branch computes.

The interpreter walks the same IR whatever the domain; a domain supplies the closures for
constants, operations and branches. `NumericDomain` (the default) computes with numpy scalars
of each node's dtype, so f32 kernels round like f32 hardware. A symbolic domain (sympy) plugs in
the same way.
"""
from __future__ import annotations

import numpy as np

from tinyad.core import ir
from tinyad.core import types as T
from tinyad.core.errors import division_by_zero, negative_int_power
from tinyad.core.ops import TABLE
from tinyad.interp import random_stream


class NumericDomain:
    def const(self, e: ir.Const):
        value = e.dtype.np(e.value)
        return lambda fr: value

    def op(self, e: ir.Op, args):
        result_type = e.dtype.np
        if e.op == "select":
            cond, a, b = args
            return lambda fr: a(fr) if cond(fr) else b(fr)
        if e.op == "random":     # fast mode's streams (interp/random_stream.py)
            name = e.dtype.name

            def draw(fr):
                fr.state = random_stream.advance(fr.state)
                drawn = random_stream.value(fr.state, name)
                return drawn if type(drawn) is result_type else drawn.astype(result_type)
            return draw
        spec = TABLE[e.op]   # the rest: the table's numpy function, in the node's result type
        fn = spec.eval
        # numpy's float32 loops for most transcendentals are SIMD approximations, off by an ulp
        # or more on many inputs; libm (fast mode, Taichi) rounds them correctly almost always.
        # Computing in float64 and rounding once gives that same value, so interp and fast agree.
        if e.dtype == T.f32 and spec.via_f64:
            fn = _in_float64(fn)

        def fix(value):
            return value if type(value) is result_type else result_type(value)
        if len(args) == 1:
            (a,) = args
            return lambda fr: fix(fn(a(fr)))
        a, b = args
        if e.op in ("floordiv", "mod") and e.dtype.is_int:   # numpy would give 0
            def divide(fr):
                left, right = a(fr), b(fr)
                if right == 0:
                    raise division_by_zero(e.loc)
                return fix(fn(left, right))
            return divide
        if e.op == "pow" and e.dtype.is_int:    # numpy raises a ValueError of its own
            def power(fr):
                base, exponent = a(fr), b(fr)
                if exponent < 0:
                    raise negative_int_power(e.loc)
                return fix(fn(base, exponent))
            return power
        return lambda fr: fix(fn(a(fr), b(fr)))

    def branch(self, cond, then, orelse):
        def run(fr):
            if cond(fr):
                then(fr)
            else:
                orelse(fr)
        return run

    def truth(self, value) -> bool:
        """A loop condition's value as a Python bool."""
        return bool(value)

    def argument(self, arg: ir.Arg, value):
        return arg.dtype.np(value)

    def result(self, value):
        return value.item() if hasattr(value, "item") else value


def _in_float64(fn):
    f64 = np.float64
    return lambda *xs: fn(*(f64(x) for x in xs))


NUMERIC = NumericDomain()
