"""CPU fast mode: generated source -> `numba.njit` (parallel, cached) -> a launcher.

A kernel with a loop worth threads is compiled as serial segments that compile/pool.py's threads
run in chunks (compile/pooledsource.py); the few it does not cover, with `parallel=True`.
All compile with `error_model="numpy"` (IEEE results, x // 0 == 0, as the interpreter) and no
fast-math flags, whatever `ti.init(fast_math=...)` says (compile/pysource.py FAST_MATH says why).
Debug mode (`ti.init(debug=True)`) compiles serially with `boundscheck=True` and an explicit
check at every field access; an out-of-bounds index raises TinyadIndexError naming the field
and the user's line, like interp mode. Without it, the accesses whose indices the IR does not
bound report a bad index after the launch, through a flag (compile/badindex.py).

Launch overhead is kept low: the launcher is a closure made once per kernel that passes each
field's array and each scalar, converted to the kernel's numpy dtype, straight to numba's
dispatcher (compiled for one explicit signature, so no type inference at call time). A
parallel kernel's launch first lets compile/threads.py choose its thread count.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from tinyad.compile import ahead, badindex, cache, threads
from tinyad.compile.pooledsource import generate_pooled
from tinyad.compile.pyexpr import sanitize
from tinyad.compile.pysource import Generated, generate_cpu
from tinyad.core.errors import assertion_failed, division_by_zero, negative_int_power, out_of_bounds


def _seed(rng) -> np.int64:
    """A launch's seed for the kernel's random stream, drawn from ti.init's generator."""
    return np.int64((rng or np.random.default_rng(0)).integers(0, 2**63 - 1))


def debug_check_error(gen: Generated, exc: Exception):
    """The TinyadError for a debug-mode check that failed (compile/rt.py's check_index,
    check_divisor, check_exponent, check_assert raise these with the check's site first), or
    None if `exc` is another."""
    args = exc.args
    if not args or not isinstance(args[0], int) or not 0 <= args[0] < len(gen.sites):
        return None
    site = gen.sites[args[0]]
    if isinstance(exc, IndexError) and len(args) == 2:
        return out_of_bounds(site.field, tuple(int(i) for i in args[1]), site.loc)
    if isinstance(exc, ZeroDivisionError) and len(args) == 1:
        return division_by_zero(site.loc)
    if isinstance(exc, ArithmeticError) and len(args) == 1:
        return negative_int_power(site.loc)
    if isinstance(exc, AssertionError) and len(args) == 2:
        return assertion_failed(site.template, args[1], site.loc)
    return None


def _governed(launch):
    """A parallel kernel's launch, with as many threads as the cores other programs leave free
    (compile/threads.py)."""
    before = threads.governor().before_launch

    def governed(scalars, rng):
        before()
        return launch(scalars, rng)
    return governed


class CpuKernel:
    """A compiled kernel: `kernel(scalars)` runs it on the fields' current arrays."""

    def __init__(self, gen: Generated, fn):
        self.generated = gen
        self.fn = fn
        self.source = gen.source
        self.path = getattr(fn, "__module__", "")
        self._launch = self._make_launcher()
        # `run(scalars, rng)` (a Program's call, tinyad/backend.py) is the launcher itself: no
        # frame in between at each launch
        self.run = self._launch

    def _make_launcher(self):
        gen = self.generated
        fn, fields = self.fn, tuple(gen.fields)
        converts = tuple(d.np for d in gen.scalars)
        random = gen.uses_random
        bad = np.zeros(gen.bad_slots, np.int64) if gen.bad_slots else None
        tail = () if bad is None else (bad,)    # the bad-index flag (compile/badindex.py)
        if not converts and not random:
            def launch(scalars, rng):
                return fn(*[f.host_array for f in fields], *tail)
        elif not random:
            def launch(scalars, rng):
                return fn(*[f.host_array for f in fields],
                          *[c(v) for c, v in zip(converts, scalars)], *tail)
        else:
            def launch(scalars, rng):
                return fn(*[f.host_array for f in fields],
                          *[c(v) for c, v in zip(converts, scalars)], _seed(rng), *tail)
        if gen.parallel:
            launch = _governed(launch)
        if bad is not None:
            launch = badindex.flagged(launch, bad, gen.sites)
        if gen.launch_bounds is not None:
            launch = gen.launch_bounds.before(launch)
        if not gen.sites or bad is not None:
            return launch

        def checked(scalars, rng):
            try:
                return launch(scalars, rng)
            except (IndexError, ArithmeticError, AssertionError) as exc:
                error = debug_check_error(gen, exc)
                if error is None:
                    raise
                raise error from None
        return checked

    @property
    def dispatchers(self) -> list:
        """The module's numba functions that make up the kernel: the entry itself, or the
        segments a pooled kernel's entry runs (compile/pooledsource.py)."""
        module, entry = sys.modules.get(self.path), self.generated.entry
        return [fn for name, fn in sorted(vars(module).items())
                if (name == entry or name.startswith(entry + "_")) and hasattr(fn, "overloads")]

    def __call__(self, scalars=(), rng=None):
        """Run once; `rng` seeds ti.random() (None: a generator seeded with 0)."""
        return self._launch(scalars, rng)


def generate(kernel_ir, debug: bool = False, fast_math: bool = True,
             parallel_min: int | None = None):
    """The generated module and its cache name (stem)."""
    if not debug and os.environ.get("TINYAD_PARFORS", "0") == "0":
        gen = generate_pooled(kernel_ir, fast_math=fast_math, parallel_min=parallel_min)
    else:
        gen = generate_cpu(kernel_ir, debug=debug, fast_math=fast_math,
                           parallel_min=parallel_min)
    gen.module_name = f"{sanitize(kernel_ir.name)}_" \
                      f"{cache.key('cpu', str(debug), gen.ir_text, gen.source)}"
    return gen


# Modules generated for compile_ahead, kept for the launch that needs them (generating mpm's
# adjoints twice cost a warm start 0.4 s): id(kernel IR) -> (kernel IR, debug, fast_math, gen)
_generated_ahead: dict[int, tuple] = {}


def compile_cpu(kernel_ir, debug: bool = False, fast_math: bool = True,
                parallel_min: int | None = None) -> CpuKernel:
    ahead_ir, *options, gen = _generated_ahead.pop(id(kernel_ir), (None, None, None, None))
    if ahead_ir is not kernel_ir or options != [debug, fast_math] or parallel_min is not None:
        gen = generate(kernel_ir, debug, fast_math, parallel_min)
    ahead.need(gen.module_name)          # compiled by the helper process, or taken back
    module = cache.load(gen.module_name, gen.source)
    return CpuKernel(gen, getattr(module, gen.entry))


def compile_ahead(kernel_irs, debug: bool = False, fast_math: bool = True) -> None:
    """Start compiling these kernels in the helper process, in this order (compile/ahead.py)."""
    if not ahead.enabled():
        return
    jobs = []
    for kernel_ir in kernel_irs:
        try:
            gen = generate(kernel_ir, debug, fast_math)
        except Exception:         # noqa: BLE001  speculative: raised again if it is launched
            continue
        _generated_ahead[id(kernel_ir)] = (kernel_ir, debug, fast_math, gen)
        jobs.append((gen.module_name, gen.source))
    ahead.submit(jobs)
