"""`@ti.func`: a function inlined into the kernels that call it (the frontend recognises one by
its `is_tinyad_func`: tinyad/frontend/exprs.py)."""
from __future__ import annotations

import functools

from tinyad.core.errors import TinyadTypeError
from tinyad.frontend.scope import Source
from tinyad.notices import note


class Func:
    """A @ti.func: inlined into the kernels that call it."""

    is_tinyad_func = True     # how the frontend recognises one (frontend/exprs.py)

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self._source = None

    @property
    def source(self) -> Source:
        if self._source is None:
            self._source = Source.of(self.fn)
        return self._source

    def __get__(self, instance, owner=None):
        return self if instance is None else BoundFunc(self, instance)

    def bound_arguments(self, args):
        return args

    def __call__(self, *args, **kwargs):
        raise TinyadTypeError(f"ti.func {self.fn.__name__} can only be called from a kernel or "
                              "another ti.func", hint="wrap the call in a @ti.kernel")


class BoundFunc:
    """`self.helper` for a ti.func method, seen while tracing: inlined with `self` first."""

    is_tinyad_func = True

    def __init__(self, func: "Func", instance):
        self.fn, self.instance, self.func = func.fn, instance, func

    @property
    def source(self):
        return self.func.source

    def bound_arguments(self, args):
        return (self.instance, *args)


def func(fn=None, **_options):
    """`@ti.func`: a function inlined into the kernels that call it."""
    if fn is None:
        return lambda f: Func(f)
    return Func(fn)


def real_func(fn):
    note(f"ti.real_func {fn.__name__} is inlined like a ti.func in tinyad")
    return Func(fn)
