"""Lowering a kernel's CUDA code for a real GPU, on a machine without one.

numba's CUDA simulator runs the generated Python, so it never meets the CUDA compiler: code it
runs may still fail to lower for a GPU (the first run on a GPU failed so at every program's
first kernel, on a one-element tuple index). `lower(kernel_ir)` runs the real pipeline, numba's
CUDA typing and lowering and then NVIDIA's NVVM, to PTX for each compute capability asked for,
with no GPU and no driver. It needs the `cuda` extra (numba-cuda and the NVVM and NVRTC
libraries). The argument types are the ones compile/cuda.py's launcher passes: each field as a
C-contiguous device array (a 0-d field as one element), each scalar converted to its dtype.

`TINYAD_CUDA_PTX=9.0,8.0` makes fast mode also lower, this way, every kernel it compiles for
the CPU (compile/__init__.py): the test profile `TINYAD_TEST_ARCH=cuda-ptx` sets it, so every
fast-mode test lowers each CUDA kernel it makes (primal, adjoint, tangent and the checks'
variants). A kernel that does not lower raises CudaLoweringError naming it and the segment.
Kernels lowered before are remembered on disk by the hash of their CUDA source.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
from types import SimpleNamespace

from tinyad.compile import cache
from tinyad.compile.pyexpr import NUMBA_TYPE, sanitize
from tinyad.core import ir

DEFAULT_CCS = ((9, 0), (8, 0))      # Hopper and Ampere


class CudaLoweringError(RuntimeError):
    """Generated CUDA code that numba-cuda or NVVM refuses: a defect of tinyad's code generator."""


def compute_capabilities(text: str | None) -> tuple:
    """"9.0,8.0" -> ((9, 0), (8, 0)); empty or None -> ()."""
    ccs = []
    for part in (text or "").replace(" ", "").split(","):
        if part:
            major, _, minor = part.partition(".")
            ccs.append((int(major), int(minor or 0)))
    return tuple(ccs)


def requested() -> tuple:
    """The compute capabilities TINYAD_CUDA_PTX asks every kernel to be lowered for (none under
    numba's simulator, which has no compiler to lower with)."""
    from numba import config  # noqa: PLC0415
    if config.ENABLE_CUDASIM:
        return ()
    return compute_capabilities(os.environ.get("TINYAD_CUDA_PTX"))


def _array(dtype, rank: int) -> str:
    dims = ", ".join([":"] * (max(rank, 1) - 1) + ["::1"])
    return f"{NUMBA_TYPE[dtype.name]}[{dims}]"


def signature(gen) -> str:
    """The launcher's argument types (compile/cuda.py CudaKernel.__call__), as numba spells
    them: fields, scalars, carried locals, the error flag, the return slot, the random seed."""
    kernel = gen.kernel
    parts = [_array(f.dtype, ir.array_rank(f)) for f in gen.fields]
    parts += [NUMBA_TYPE[a.dtype.name] for a in kernel.args]
    parts += [_array(dtype, 1) for _, dtype, _ in gen.carried]
    parts.append("int32[::1]")
    if gen.ret is not None:
        parts.append(_array(gen.ret, 1))
    if gen.uses_random:
        parts.append("int64")
    if gen.bad_slots:
        parts.append("int64[::1]")      # the bad-index flag (compile/badindex.py)
    return f"void({', '.join(parts)})"


@contextlib.contextmanager
def _device_of_capability(cc):
    """numba-cuda compiles a kernel's device functions for the current device's compute
    capability: with no device, pretend one of `cc` for the time of the lowering."""
    from numba.cuda import dispatcher  # noqa: PLC0415
    real = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=cc)
    try:
        yield
    finally:
        dispatcher.get_current_device = real


def _directory() -> str:
    """Where lowered modules and the markers of kernels that lowered live: beside the cache's
    own entries, not among them."""
    path = os.path.join(cache.cache_dir(), "cuda-ptx")
    os.makedirs(path, exist_ok=True)
    return path


def _fresh_module(name: str, source: str):
    """The generated module, imported on its own (the simulator's copy, if any, is not the
    real target's)."""
    path = os.path.join(_directory(), name + ".py")
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(source)
    os.replace(tmp, path)           # whole, for a test worker lowering the same kernel
    spec = importlib.util.spec_from_file_location(f"_ptx_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lower(kernel_ir, ccs=DEFAULT_CCS, debug: bool = False, gen=None) -> dict:
    """{(segment, cc): PTX text} for every cuda.jit kernel of this kernel's CUDA module (`gen`:
    that module, if generated already)."""
    from numba import cuda  # noqa: PLC0415

    from tinyad.compile.cudasource import generate_cuda  # noqa: PLC0415
    if getattr(cuda, "implementation", "") != "NVIDIA":
        raise CudaLoweringError("lowering for CUDA needs numba-cuda, not numba's built-in CUDA "
                                "target: pip install -e \".[cuda]\"")
    gen = gen or generate_cuda(kernel_ir, debug=debug)
    key = cache.key("cuda-ptx", str(debug), gen.ir_text, gen.source)
    name = f"{sanitize(kernel_ir.name)}_{key}"
    module = _fresh_module(name, gen.source)
    sig = signature(gen)
    out = {}
    for segment in gen.segments:
        function = getattr(module, segment).py_func
        cc = min(ccs)       # numba's typing and lowering once, for the oldest capability
        try:
            with _device_of_capability(cc):
                library = _lowered(cuda, function, sig, cc)
            for cc in ccs:      # then NVVM for each
                out[segment, cc] = (library.get_asm_strs(cc=cc)[0] if library is not None
                                    else cuda.compile_ptx(function, sig, cc=cc)[0])
        except Exception as exc:    # noqa: BLE001  any refusal is the generator's defect
            raise CudaLoweringError(
                f"kernel {kernel_ir.name}: segment {segment} does not lower for CUDA "
                f"sm_{cc[0]}{cc[1]} ({type(exc).__name__}: {_first_lines(exc)})\n"
                f"generated source: {os.path.join(_directory(), name + '.py')}"
            ) from exc
    return out


def _lowered(cuda, function, sig, cc):
    """The kernel's code library (numba's LLVM IR, from which NVVM makes PTX for any capability),
    or None where numba-cuda's internals differ: compile_ptx then runs the whole pipeline for
    each capability (its front end is 85% of the time)."""
    from numba.cuda import compiler  # noqa: PLC0415
    compile_library = getattr(compiler, "_compile_pyfunc_with_fixup", None)
    if compile_library is None:
        return None
    library, _ = compile_library(function, sig, device=False, cc=cc, abi="numba")
    return library


def _first_lines(exc: Exception, n: int = 6) -> str:
    return "\n".join(str(exc).strip().splitlines()[:n])


def check_lowers(kernel_ir, ccs, debug: bool = False) -> None:
    """Lower once per CUDA source and set of capabilities; remembered on disk when it lowered."""
    from tinyad.compile.cudasource import generate_cuda  # noqa: PLC0415
    gen = generate_cuda(kernel_ir, debug=debug)
    marker = os.path.join(_directory(), f"{cache.key('ptx-ok', repr(ccs), gen.source)}.ok")
    if os.path.exists(marker):
        return
    lower(kernel_ir, ccs, debug, gen)
    with open(marker, "w", encoding="utf-8"):
        pass


