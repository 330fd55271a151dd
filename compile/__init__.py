"""Fast mode: tinyad IR -> readable Python source -> numba (CPU `njit`, or `cuda.jit`).

    compile_kernel(kernel_ir, backend="cpu", debug=False, fast_math=True)  ->  kernel(scalars)

The same IR the interpreter runs (forward kernels and the adjoint kernels of reverse mode) is
turned into a Python module (compile/pysource.py), cached on disk by a hash (compile/cache.py)
and compiled by numba (compile/cpu.py, compile/cuda.py). The returned object is called with the
kernel's scalar arguments (and the generator that seeds ti.random()), reads and writes the
fields' arrays, and returns the kernel's return value. `.source` is the generated code.
compile/backend.py makes this tinyad's "fast" mode (tinyad/backend.py).
"""
from __future__ import annotations

_cuda_ok: bool | None = None


def compile_kernel(kernel_ir, backend: str = "cpu", debug: bool = False,
                   fast_math: bool = True, parallel_min: int | None = None, mirror=None):
    """Compile one kernel. `fast_math`: let the CPU compiler reassociate float math (see
    compile/pysource.py). `parallel_min`: the smallest static trip count a parallel loop needs
    to get threads (None: TINYAD_PARALLEL_MIN or 256; 0: always). `mirror`: on CUDA, the
    DeviceMirror holding the fields' device copies (None: a new one)."""
    if backend == "cuda":
        from tinyad.compile.cuda import compile_cuda  # noqa: PLC0415
        if mirror is None:
            from tinyad.compile.devicemirror import DeviceMirror  # noqa: PLC0415
            mirror = DeviceMirror()
        return compile_cuda(kernel_ir, mirror, debug=debug)
    if backend != "cpu":
        raise ValueError(f"unknown backend {backend!r}: use 'cpu' or 'cuda'")
    from tinyad.compile.cpu import compile_cpu  # noqa: PLC0415
    return compile_cpu(kernel_ir, debug=debug, fast_math=fast_math, parallel_min=parallel_min)


def compile_ahead(kernel_irs, backend: str = "cpu", debug: bool = False,
                  fast_math: bool = True) -> None:
    """Start compiling kernels that will be needed soon in a helper process (CPU only)."""
    if backend == "cpu":
        from tinyad.compile.cpu import compile_ahead as ahead  # noqa: PLC0415
        ahead(kernel_irs, debug, fast_math)


def cuda_available() -> bool:
    """Is there a CUDA GPU numba can use (or the simulator, NUMBA_ENABLE_CUDASIM=1)?"""
    global _cuda_ok
    if _cuda_ok is None:
        try:
            from numba import cuda  # noqa: PLC0415
            _cuda_ok = bool(cuda.is_available())
        except Exception:           # no driver, no toolkit, a broken install: no CUDA
            _cuda_ok = False
    return _cuda_ok


def backend_for(arch: str) -> str:
    """The backend fast mode uses for `ti.init(arch=...)`: cuda when asked for and usable."""
    return "cuda" if str(arch) == "cuda" and cuda_available() else "cpu"
