"""Which iteration of its parallel loop an access touched an element in, worked out from the
access's indices: the replay witness keeps copies of what launches read, not who read it, and
its reports name the iteration too.

Only indices computed from the loop variable, constants, the launch's integer arguments and the
integer locals the loop assigns once (an ndrange's flattened indices, a neighbour's index) are
solved; anything else (a load, an inner loop's variable) gives None: the report then names no
iteration rather than a wrong one.
"""
from __future__ import annotations

import numpy as np

from tinyad.check.report import Access
from tinyad.core import ir
from tinyad.core.ops import TABLE


class Unsolved(Exception):
    """The indices use something only the launch itself knew."""


def first_iteration(site, element: tuple, kernel: ir.Kernel, scalars: tuple) -> int | None:
    """The first iteration (the loop variable's value) in which `site` touched `element`, or
    None where that cannot be worked out here."""
    loop = site.loops[0] if len(site.loops) == 1 else None
    if not (isinstance(loop, ir.For) and loop.parallel):
        return None
    env = {arg.name: np.asarray(value) for arg, value in zip(kernel.args, scalars)}
    local = dict(site.preludes.get(id(loop), ()))
    try:
        with np.errstate(all="raise"):
            start, stop = int(_eval(loop.start, env, local)), int(_eval(loop.stop, env, local))
            env[loop.var] = each = np.arange(start, stop, dtype=np.int64)
            match = np.ones(each.shape, bool)
            for index, wanted in zip(site.indices, element):
                match &= np.broadcast_to(_eval(index, env, local), each.shape) == wanted
    except (Unsolved, ValueError, TypeError, FloatingPointError, ZeroDivisionError):
        return None
    found = np.flatnonzero(match)
    return int(each[found[0]]) if found.size else None


def first_iterations(site, kernel: ir.Kernel, scalars: tuple):
    """For each element `site` touches in a launch: (the flat indices, over the field's shape
    and element shape, sorted; the first iteration touching each), or None where the indices
    do not say (as `first_iteration`)."""
    loop = site.loops[0] if len(site.loops) == 1 else None
    if not (isinstance(loop, ir.For) and loop.parallel):
        return None
    env = {arg.name: np.asarray(value) for arg, value in zip(kernel.args, scalars)}
    local = dict(site.preludes.get(id(loop), ()))
    dims = tuple(site.field.shape) + tuple(site.field.element_shape)
    try:
        with np.errstate(all="raise"):
            start, stop = int(_eval(loop.start, env, local)), int(_eval(loop.stop, env, local))
            env[loop.var] = each = np.arange(start, stop, dtype=np.int64)
            index = [np.broadcast_to(_eval(i, env, local), each.shape).astype(np.int64)
                     for i in site.indices]
    except (Unsolved, ValueError, TypeError, FloatingPointError, ZeroDivisionError):
        return None
    if len(index) != len(dims):
        return None
    inside = np.ones(each.shape, bool)
    for i, extent in zip(index, dims):
        inside &= (i >= 0) & (i < extent)
    flat = np.ravel_multi_index(tuple(i[inside] for i in index), dims) if dims else \
        np.zeros(int(inside.sum()), np.int64)
    flat, first = np.unique(flat, return_index=True)
    return flat, each[inside][first]


def _eval(e, env: dict, local: dict):
    """`e` for every iteration at once (a numpy array, or a scalar)."""
    if isinstance(e, ir.Const):
        return np.asarray(e.value, e.dtype.np)
    if isinstance(e, ir.Var):
        if e.name not in env:
            if e.name not in local:
                raise Unsolved(e.name)
            env[e.name] = _eval(local[e.name], env, local)
        return env[e.name]
    if not isinstance(e, ir.Op) or e.op == "random" or not e.dtype.is_int and e.op != "cast":
        raise Unsolved(e)
    args = [_eval(a, env, local) for a in e.args]
    if e.op == "cast":
        return np.asarray(args[0]).astype(e.dtype.np)
    if e.op == "select":
        return np.where(*args)
    if e.op in ("floordiv", "mod") and np.any(np.asarray(args[1]) == 0):
        raise Unsolved(e)
    return np.asarray(TABLE[e.op].eval(*args)).astype(e.dtype.np, copy=False)


def launch_iteration(site, element: tuple, launch) -> int | None:
    """The iteration of a checker's `launch` (tinyad/check/launches.py Launch) in which `site`
    touched `element`; None where the indices do not say, or `site` is unknown."""
    if site is None:
        return None
    return first_iteration(site, element, launch.compiled.ir, launch.scalars)


def written_access(launch, written, element: tuple, value=None) -> Access:
    """A launch's write of `element` (a tinyad/check/regions.py Written; None: unknown, a store at
    no line) as a report names it, with the iteration its indices give."""
    site = None if written is None else written.site
    return Access("store" if written is None else written.kind,
                  None if site is None else site.node.loc, launch.kernel, launch.number,
                  launch_iteration(site, element, launch), value, launch.time)
