"""CUDA fast mode: generated source -> `numba.cuda.jit` kernels -> a launcher.

A kernel becomes segments (compile/pysource.py): each parallel loop is a grid-stride
`cuda.jit` kernel; the code between parallel loops runs in a one-thread kernel; top-level
locals that cross segments travel in one-element device arrays. `ti.atomic_*` in a parallel
loop is `cuda.atomic.*`; save stacks are `cuda.local.array`s of fixed size (CUDA_STACK; an
overflow raises TinyadRuntimeError after the launch). An index the IR does not bound (every
index with debug=True) is clamped into its field and reported after the launch
(compile/badindex.py).

Fields live on the device between launches, in a device mirror (compile/devicemirror.py): a
field's values are brought back only when Python scope reads them, and sent again only after
Python scope wrote them, so a steady-state Tape of CUDA kernels moves no field data (its fills
run on the device). The generated module is cached
on disk like the CPU's; the kernels themselves are compiled by numba at their first launch in
each process.

This module imports without a GPU. With NUMBA_ENABLE_CUDASIM=1 (set before numba is imported)
numba's simulator runs the same kernels in Python threads: slow, but it executes the generated
code, so CI tests it on tiny sizes.
"""
from __future__ import annotations

import numpy as np
from numba import config as numba_config
from numba import cuda

from tinyad.compile import cache
from tinyad.compile.badindex import bad_index_error
from tinyad.compile.cudasource import generate_cuda
from tinyad.compile.pyexpr import sanitize
from tinyad.compile.pysource import CUDA_STACK, Generated
from tinyad.core.errors import TinyadRuntimeError

SIMULATOR = bool(numba_config.ENABLE_CUDASIM)


class _SimulatorLibdevice:
    """The few libdevice functions the generated code calls, for the simulator (which has no
    libdevice): numpy's, which keep float32 as float32."""
    floorf = floor = staticmethod(np.floor)
    ceilf = ceil = staticmethod(np.ceil)
    rintf = rint = staticmethod(np.rint)
    fminf = fmin = staticmethod(np.fmin)
    fmaxf = fmax = staticmethod(np.fmax)


if SIMULATOR:
    libdevice = _SimulatorLibdevice()
else:
    try:
        from numba.cuda import libdevice  # noqa: F401
    except ImportError:            # a numba without its CUDA target: nothing can launch anyway
        libdevice = _SimulatorLibdevice()


# Threads per block of a parallel loop; a block's sum (compile/pysource.py block_sum) has a
# shared-memory slot for each.
MAX_THREADS = 256


def grid(n):
    """(blocks, threads per block) for a parallel loop of n iterations (None: not known on the
    host). Grid-stride loops make any grid correct; this one just keeps the GPU busy."""
    if SIMULATOR:                 # every simulated thread is a Python thread: few and small
        n = 64 if n is None else max(int(n), 1)
        threads = min(n, 64)
        return min(-(-n // threads), 4), threads
    if n is None:
        return 1024, MAX_THREADS
    n = max(int(n), 1)
    return min(-(-n // MAX_THREADS), 8192), MAX_THREADS


class CudaKernel:
    """A compiled kernel: `kernel(scalars)` launches it on the fields' device copies."""

    def __init__(self, gen: Generated, module, mirror):
        self.generated = gen
        self.mirror = mirror          # where the fields' device copies live
        self.module = module
        self.source = gen.source
        self.launch = module.launch
        names = [a.name for a in gen.kernel.args]
        self.carried = [(np.dtype(dtype.np), names.index(name) if is_arg else None)
                        for name, dtype, is_arg in gen.carried]
        self.converts = tuple(d.np for d in gen.scalars)
        # Only a save stack can set the error flag: a kernel without one never reads it back,
        # so its launch does not wait for the GPU. The flag and the return slot are allocated
        # once (the kernel writes its return value at every launch).
        self.reads_error = gen.sets_error
        self._err = self._ret = None
        # the bad-index flag (compile/badindex.py): read back after every launch that has it
        self._bad = None

    def __call__(self, scalars=(), rng=None):
        """Launch once; `rng` seeds ti.random() (None: a generator seeded with 0)."""
        gen = self.generated
        # ndarray arguments: the arrays this launch binds them to (tinyad/arrayparams.py,
        # asked by marker, as core/ir.py is_field asks for a field)
        arrays = [f.bound if getattr(f, "is_array_param", False) else f for f in gen.fields]
        for a in arrays:
            if getattr(a, "external", False):   # a user's numpy array: may have changed
                self.mirror.invalidate(a)
        device = [self.mirror.device_array(a) for a in arrays]
        values = [c(v) for c, v in zip(self.converts, scalars)]
        carry = [cuda.to_device(np.array([values[k] if k is not None else 0], dtype))
                 for dtype, k in self.carried]
        if self._err is None:
            self._err = cuda.to_device(np.zeros(1, np.int32))
            if gen.ret is not None:
                self._ret = cuda.to_device(np.zeros(1, gen.ret.np))
        err, ret = self._err, self._ret
        extra = [err] if ret is None else [err, ret]
        if gen.uses_random:
            extra.append(np.int64((rng or np.random.default_rng(0)).integers(0, 2**62)))
        if gen.bad_slots:
            if self._bad is None:
                self._bad = cuda.to_device(np.zeros(gen.bad_slots, np.int64))
            extra.append(self._bad)
        if gen.launch_bounds is not None:
            gen.launch_bounds.check(scalars)
        self.launch(*device, *values, *carry, *extra)
        for k in gen.written:
            self.mirror.kernel_wrote(arrays[k])     # the device has the new values
            if getattr(arrays[k], "external", False):
                self.mirror.to_host(arrays[k])      # written through, as on the CPU
        if self.reads_error and err.copy_to_host()[0]:
            err.copy_to_device(np.zeros(1, np.int32))     # for the next launch
            raise TinyadRuntimeError(
                f"kernel {gen.kernel.name}: a save stack of the adjoint kernel overflowed "
                f"({CUDA_STACK} entries per thread on CUDA)", gen.kernel.loc,
                hint="loop fewer times inside one parallel iteration, or run on the CPU")
        if gen.bad_slots:
            bad = self._bad.copy_to_host()
            if bad[0]:
                self._bad.copy_to_device(np.zeros(gen.bad_slots, np.int64))
                raise bad_index_error(gen.sites, bad)
        if ret is not None:
            return ret.copy_to_host()[0].item()
        return None

    run = __call__


def compile_cuda(kernel_ir, mirror, debug: bool = False) -> CudaKernel:
    """`mirror`: the DeviceMirror (compile/devicemirror.py) that holds the fields' copies."""
    gen = generate_cuda(kernel_ir, debug=debug)
    flavour = "cudasim" if SIMULATOR else "cuda"
    stem = f"{sanitize(kernel_ir.name)}_{cache.key(flavour, str(debug), gen.ir_text, gen.source)}"
    gen.module_name = stem
    return CudaKernel(gen, cache.load(stem, gen.source), mirror)
