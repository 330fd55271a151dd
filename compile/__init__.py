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

import os

_cuda_why_not: str | None = None    # "" once probed and usable


def compile_kernel(kernel_ir, backend: str = "cpu", debug: bool = False,
                   fast_math: bool = True, parallel_min: int | None = None, mirror=None):
    """Compile one kernel. `fast_math`: the CPU compiler's fast-math flags, today none (see
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
    if os.environ.get("TINYAD_CUDA_PTX"):      # lower its CUDA code too (compile/ptx.py)
        from tinyad.compile import ptx  # noqa: PLC0415
        ccs = ptx.requested()
        if ccs:
            ptx.check_lowers(kernel_ir, ccs, debug)
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
    return cuda_unavailable_reason() is None


def cuda_unavailable_reason() -> str | None:
    """Why fast mode cannot run on CUDA here, in words for the user, or None when it can."""
    global _cuda_why_not
    if _cuda_why_not is None:
        _cuda_why_not = _probe_cuda() or ""
    return _cuda_why_not or None


def _probe_cuda() -> str | None:
    hint = 'pip install -e ".[cuda]" installs the set tinyad is tested with'
    try:
        from numba import config, cuda  # noqa: PLC0415
        if not cuda.is_available():
            return "no CUDA GPU found"
        if config.ENABLE_CUDASIM:
            return None
        if getattr(cuda, "implementation", "") != "NVIDIA":
            return f"numba's built-in CUDA target is not numba-cuda: {hint}"
        # numba-cuda loads its numpy support at the first launch; 0.30 fails there under
        # numpy 2.5 (it overloads np.row_stack, which numpy 2.5 removed)
        import numba.cuda.np.arrayobj  # noqa: F401, PLC0415
    except Exception as exc:     # noqa: BLE001  a broken driver or an incompatible set
        import numpy  # noqa: PLC0415
        return (f"numba's CUDA target fails with numpy {numpy.__version__} "
                f"({type(exc).__name__}: {exc}): {hint}")
    return None


def backend_for(arch: str) -> str:
    """The backend fast mode uses for `ti.init(arch=...)`: cuda when asked for and usable."""
    return "cuda" if str(arch) == "cuda" and cuda_available() else "cpu"
