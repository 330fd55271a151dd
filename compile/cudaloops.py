"""CUDA's parallel loops, a mixin of the generator (compile/pysource.py).

A parallel loop is a grid-stride loop: each thread takes every gridsize-th iteration, so any
grid covers the range (compile/cuda.py `grid` chooses one). Adds into one element (a loss) go
to a thread's own accumulator, summed within the block in shared memory after the loop and
added to the field once per block, as Taichi does.
"""
from __future__ import annotations

from tinyad.compile.pyexpr import NUMBA_TYPE


class CudaLoops:
    """The generator's CUDA loops (it supplies line, block, names, zero, scope_prologue, ...)."""

    def grid_stride_loop(self, s, plan, depth, lo, hi, var, inner):
        """The parallel loop `s` with its per-thread sums: one float32 atomic per iteration
        loses the small terms once the sum is large (a wave's loss over 1024^2 cells:
        0.0044781 for 0.0044937), and serialises every thread on one address."""
        for acc, _, _, dtype in plan.reductions:
            self.line(depth, f"{acc} = {self.zero(dtype, wrap=False)}")
        first = "cuda.grid(1)" if lo == "0" else f"{lo} + cuda.grid(1)"
        self.line(depth, f"for {var} in range({first}, {hi}, cuda.gridsize(1)):  # parallel",
                  s.loc)
        self.scope_prologue(id(s), depth + 1, inner, index=var, stream=self.parallel_ordinal(s))
        self.block(s.body, depth + 1, inner)
        for acc, fld, indices, dtype in plan.reductions:
            self.block_sum(acc, fld, indices, dtype, depth, s.loc)

    def block_sum(self, acc, fld, indices, dtype, depth, loc):
        """Sum `acc` over the block's threads in shared memory (halving the count each step,
        any block size up to MAX_THREADS), then thread 0 adds the block's sum to the field.
        Every thread of the block gets here: a grid-stride loop has no early exit."""
        shared, t, n, half = (self.names.temp(x) for x in ("shared", "t", "n", "half"))
        self.line(depth, f"{shared} = cuda.shared.array(MAX_THREADS, "
                         f"{NUMBA_TYPE[dtype.name]})  # the block's sum of {acc}")
        self.line(depth, f"{t} = cuda.threadIdx.x")
        self.line(depth, f"{shared}[{t}] = {acc}")
        self.line(depth, "cuda.syncthreads()")
        self.line(depth, f"{n} = cuda.blockDim.x")
        self.line(depth, f"while {n} > 1:")
        self.line(depth + 1, f"{half} = ({n} + 1) // 2")
        self.line(depth + 1, f"if {t} < {n} - {half}:")
        self.line(depth + 2, f"{shared}[{t}] += {shared}[{t} + {half}]")
        self.line(depth + 1, "cuda.syncthreads()")
        self.line(depth + 1, f"{n} = {half}")
        self.line(depth, f"if {t} == 0:")
        self.line(depth + 1, f"cuda.atomic.add({self.arrays[id(fld)]}, "
                             f"{self.atomic_index(indices)}, {shared}[0])", loc)
