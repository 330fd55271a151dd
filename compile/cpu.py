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


def _launcher(fn, gen: Generated, bad):
    """`launch(scalars, rng)`: one frame that passes each field's array, each scalar converted
    to its numpy dtype, the seed and the bad-index flag to the compiled `fn`, written out for
    this kernel's arity (a launch of a small kernel costs mostly this Python: a wrapper per
    step cost mass_spring's 4096 launches 9 ms). Around the call, as the kernel needs them:
    the bounds check of a new set of integer arguments (badindex.LaunchBounds: a set lookup
    for those seen), the thread count of a parallel kernel (compile/threads.py), the flag's
    report after it (compile/badindex.py)."""
    namespace = {"fn": fn, "bad": bad, "sites": gen.sites, "seed": _seed,
                 "bad_index_error": badindex.bad_index_error}
    arguments = []
    for k, fld in enumerate(gen.fields):
        namespace[f"f{k}"] = fld
        arguments.append(f"f{k}.host_array")
    for k, dtype in enumerate(gen.scalars):
        namespace[f"c{k}"] = dtype.np
        arguments.append(f"c{k}(scalars[{k}])")
    if gen.uses_random:
        arguments.append("seed(rng)")
    if bad is not None:
        arguments.append("bad")
    lines = ["def launch(scalars, rng):"]
    if gen.launch_bounds is not None:
        namespace["seen"], namespace["check"] = gen.launch_bounds.seen, gen.launch_bounds.check
        lines += ["    if scalars not in seen:", "        check(scalars)"]
    if gen.parallel:
        namespace["before"] = threads.governor().before_launch
        lines.append("    before()")
    if bad is None:
        lines.append(f"    return fn({', '.join(arguments)})")
    else:
        lines += [f"    result = fn({', '.join(arguments)})",
                  "    if bad[0]:", "        raise bad_index_error(sites, bad)",
                  "    return result"]
    exec("\n".join(lines), namespace)  # noqa: S102  (names from this function only)
    return namespace["launch"]


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
        bad = np.zeros(gen.bad_slots, np.int64) if gen.bad_slots else None
        launch = _launcher(self.fn, gen, bad)
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
