"""The box of elements each global access may touch, as a function of the launch's integer
arguments (for the rule checker: tinyad/check/regions.py, readwitness.py, rows.py)."""
from __future__ import annotations

from tinyad.analysis.sites import Site
from tinyad.core import ir

UNKNOWN = 1 << 62     # an interval end nothing bounds: the final clip makes it the whole dimension


def box_function(site: Site, shape: tuple, args: tuple):
    """A function of the integer arguments `args` (in that order) -> the box ((lo, hi) per
    dimension, hi exclusive, clipped to `shape`) that `site` may touch in that launch, or None
    if it cannot happen (an empty loop around it). Indices are bounded by interval arithmetic
    over loop ranges and arguments (+, -, *, // and % by a constant, min, max); any other
    index (a gather `x[idx[i]]`, a local) spans its whole dimension. Generated as Python
    source once per site, so that a launch pays a few microseconds."""
    lines = [f"def box({', '.join('a_' + n for n in args)}):"]
    env = {n: (f"a_{n}", f"a_{n}") for n in args}
    counter = iter(range(1 << 30))

    def bind(lo, hi):
        k = next(counter)
        lines.append(f"    l{k} = {lo}; h{k} = {hi}")
        return f"l{k}", f"h{k}"

    for loop in site.loops:
        if isinstance(loop, ir.While):
            continue
        start, stop = _interval_src(loop.start, env, bind), _interval_src(loop.stop, env, bind)
        if start is None or stop is None:
            env[loop.var] = None
        else:
            lines.append(f"    if {stop[1]} - 1 < {start[0]}: return None")
            env[loop.var] = bind(start[0], f"{stop[1]} - 1")
        for name, value in site.preludes.get(id(loop), ()):
            env[name] = _interval_src(value, env, bind)
    dims = []
    for expr, size in zip(site.indices, shape):
        span = _interval_src(expr, env, bind)
        if span is None:
            dims.append(f"(0, {size})")
            continue
        lo, hi = bind(f"max(0, {span[0]})", f"min({size}, {span[1]} + 1)")
        lines.append(f"    if {hi} <= {lo}: return None")   # out of bounds: reported elsewhere
        dims.append(f"({lo}, {hi})")
    lines.append(f"    return ({''.join(d + ', ' for d in dims)})")
    namespace: dict = {}
    exec("\n".join(lines), namespace)   # noqa: S102  (source built above from the IR)
    function = namespace["box"]
    # no argument moves it (a weight matrix read in every launch): the same box in every launch
    function.fixed = not any(f"a_{n}" in line for line in lines[1:] for n in args)
    return function


def _interval_src(expr, env, bind):
    """Python expressions (lo, hi) bounding an integer IR expression, or None if unbounded."""
    if isinstance(expr, ir.Const):
        return (str(int(expr.value)),) * 2 if expr.dtype.is_int else None
    if isinstance(expr, ir.Var):
        return env.get(expr.name)
    if not isinstance(expr, ir.Op) or not expr.dtype.is_int:
        return None
    op, raw = expr.op, expr.args
    if op in ("floordiv", "mod") and len(raw) == 2 and isinstance(raw[1], ir.Const) \
            and int(raw[1].value) > 0:
        a = _interval_src(raw[0], env, bind)
        if a is None:
            return None
        c = int(raw[1].value)
        if op == "floordiv":
            return bind(f"({a[0]}) // {c}", f"({a[1]}) // {c}")
        inside = f"0 <= {a[0]} and {a[1]} < {c}"
        return bind(f"({a[0]} if {inside} else (0 if {a[0]} >= 0 else -{UNKNOWN}))",
                    f"({a[1]} if {inside} else ({c - 1} if {a[0]} >= 0 else {UNKNOWN}))")
    args = [_interval_src(a, env, bind) for a in raw]
    if any(a is None for a in args):
        return None
    if op in ("cast", "pos"):
        return args[0]
    if op == "neg":
        return bind(f"-({args[0][1]})", f"-({args[0][0]})")
    if len(args) != 2:
        return None
    (a, b), (c, d) = args
    if op == "add":
        return bind(f"{a} + {c}", f"{b} + {d}")
    if op == "sub":
        return bind(f"{a} - {d}", f"{b} - {c}")
    if op in ("min", "max"):
        return bind(f"{op}({a}, {c})", f"{op}({b}, {d})")
    if op == "mul":
        products = f"{a} * {c}, {a} * {d}, {b} * {c}, {b} * {d}"
        return bind(f"min({products})", f"max({products})")
    return None


def boxes_overlap(a: tuple, b: tuple) -> bool:
    for (lo1, hi1), (lo2, hi2) in zip(a, b):   # (a loop, not all(...): the checker
        if lo1 >= hi2 or lo2 >= hi1:           # asks at every write of a watched field)
            return False
    return True


def box_contains(outer: tuple, inner: tuple) -> bool:
    return all(lo1 <= lo2 and hi2 <= hi1 for (lo1, hi1), (lo2, hi2) in zip(outer, inner))
