"""CUDA source: the kernel's top level cut into segments, one `cuda.jit` kernel each.

Each parallel loop is one kernel with a grid-stride loop; the statements between them run in
a one-thread kernel. Top-level locals that one segment assigns and a later one reads travel
through one-element device arrays. A plain Python `launch` runs the segments in order.
"""
from __future__ import annotations

from tinyad.analysis.queries import assigned, python_bound, referenced, static_trip
from tinyad.compile.nesting import carried_locals, segments
from tinyad.compile.pysource import Ctx, Generated, Generator
from tinyad.core import ir


class CudaModule:
    """The CUDA half of the generator: segments, carried locals, the Python driver."""

    def __init__(self, gen: "Generator"):
        self.gen = gen

    def segments(self):
        gen, body = self.gen, self.gen.kernel.body
        pieces = segments(body, gen.loops) or [("serial", [])]
        # a save stack at the top level lives in one thread's local memory: it cannot be
        # shared by two launches, so such a kernel runs as one serial segment
        for name, scope in gen.stack_scope.items():
            if scope is None and sum(name in referenced(st) for _, st in pieces) > 1:
                gen.loops.clear()
                gen.plan_all_scopes()
                return [("serial", list(body))]
        return pieces

    def source(self) -> str:
        gen = self.gen
        k = gen.kernel
        segments = self.segments()
        args = {a.name for a in k.args}
        refs = [referenced(st) for _, st in segments]
        writes = [assigned(st) if kind == "serial" else set() for kind, st in segments]
        carried = carried_locals(refs, writes, list(gen.types))
        carry = {n: f"_c_{gen.local[n]}" for n in carried}
        params = ([gen.field_names[id(f)] for f in gen.fields]
                  + [gen.local[a.name] for a in k.args] + list(carry.values()) + ["_err"]
                  + (["_ret"] if k.ret else []) + ([gen.seed] if gen.uses_random else [])
                  + ([gen.bad] if gen.bad else []))
        name = gen.entry
        kernels, launches = [], []
        self.segment_names = []
        for i, (kind, stmts) in enumerate(segments):
            gen.lines = []
            gen.last_loc = None
            ctx = Ctx(None, "_rs")
            gen.scope_prologue(None, 1, ctx, index=str(-1 - i), only=refs[i] - set(carry))
            for n in carried:
                if n in refs[i]:
                    gen.line(1, f"{gen.local[n]} = {carry[n]}[0]")
            gen.block(stmts, 1, ctx)
            for n in carried:
                if n in writes[i]:
                    gen.line(1, f"{carry[n]}[0] = {gen.local[n]}")
            seg = gen.names.take(f"{name}_{i}")      # never shadowed by a parameter
            self.segment_names.append(seg)
            what = "one thread" if kind == "serial" else "a grid-stride loop"
            kernels += ["", "", "@cuda.jit", f"def {seg}({', '.join(params)}):",
                        f'    """segment {i}: {what}."""', *gen.lines]
            if kind == "serial":
                launches.append(f"    {seg}[1, 1]({', '.join(params)})")
            else:
                loop = stmts[0]
                trip = static_trip(loop)
                if trip is not None:
                    n = str(trip)
                elif python_bound(loop.start, args) and python_bound(loop.stop, args):
                    n = f"int({gen.value(loop.stop)}) - int({gen.value(loop.start)})"
                else:
                    n = "None"
                launches += [f"    _blocks, _threads = grid({n})",
                             f"    {seg}[_blocks, _threads]({', '.join(params)})"]
        driver = ["", "", f"def launch({', '.join(params)}):",
                  '    """Run the segments in order (the arrays are device arrays)."""']
        driver += launches
        out = gen.header()
        out += ["import math", "", "import numpy as np",
                "from numba import cuda, float32, float64, int8, int16, int32, int64, uint8, "
                "uint16, uint32, uint64",
                "from tinyad.compile.cuda import MAX_THREADS, grid, libdevice"]
        out += gen.shared_globals("@cuda.jit(device=True)")
        out += kernels + driver
        self.carried = [(n, k.args[[a.name for a in k.args].index(n)].dtype if n in args
                         else gen.types[n], n in args) for n in carried]
        return "\n".join(out) + "\n"


def generate_cuda(kernel: ir.Kernel, debug: bool = False) -> Generated:
    gen = Generator(kernel, "cuda", debug, 0)
    module = CudaModule(gen)
    source = module.source()
    written = sorted(gen.fields.index(f) for f in ir.fields_written(kernel.body))
    generated = Generated(kernel, "cuda", source, "launch", gen.fields,
                          [a.dtype for a in kernel.args], gen.uses_random, kernel.ret,
                          bool(gen.loops), gen.sites, written)
    generated.carried = module.carried
    generated.segments = module.segment_names      # the cuda.jit kernels, in launch order
    generated.sets_error = any(isinstance(s, ir.Save) for s in ir.walk_stmts(kernel.body))
    generated.bad_slots, generated.launch_bounds = gen.bad_slots, gen.launch_bounds
    return generated
