"""Fast mode as a backend (tinyad/backend.py): kernels compiled by numba, for the CPU or CUDA.

Besides compiling and launching, it owns two things a fast-mode program needs across kernels:

  * compiling ahead: it remembers the order kernels were launched in, and when the first
    adjoint is needed (a backward pass has begun) it queues the adjoints of the kernels launched
    so far, latest first, for a helper process (compile/ahead.py);
  * on CUDA, the fields' device copies (compile/devicemirror.py), its `storage`.

Fast mode runs no rule checks: its `checks` are the no-op hooks.
"""
from __future__ import annotations

from tinyad.backend import Backend
from tinyad.compile import backend_for, compile_ahead, compile_kernel


class FastBackend(Backend):
    name = "fast"

    def __init__(self, config, rng):
        super().__init__(config, rng)
        self.target = backend_for(config.arch)          # "cpu" or "cuda"
        if str(config.arch) == "cuda" and self.target != "cuda":
            self.notices.append("ti.init(arch=cuda): no CUDA GPU found, fast mode runs on the CPU")
        if self.target == "cuda":
            from tinyad.compile.devicemirror import DeviceMirror  # noqa: PLC0415  (imports CUDA)
            self.storage = DeviceMirror()
        self.launched: dict = {}         # traced kernel -> number of its latest primal launch
        self.launches = 0
        self.adjoints_queued = False     # compile/ahead.py has been given the adjoints

    def prepare(self, kernel_ir):
        config = self.config
        mirror = self.storage if self.target == "cuda" else None
        return compile_kernel(kernel_ir, self.target, config.debug, config.fast_math,
                              mirror=mirror)

    def launch(self, traced, variant, scalars, record=None, manual=True):
        program = traced.program(variant)
        if variant == "primal":
            self.launches += 1
            self.launched[traced] = self.launches
        return program(scalars, self.rng), None

    def backward_starts(self, first) -> None:
        """Start compiling the adjoints of the kernels launched so far, latest first, in a
        helper process while this one compiles `first`'s."""
        if self.adjoints_queued:
            return
        self.adjoints_queued = True
        kernels = sorted((k for k in self.launched if k is not first
                          and not k.has_program("adjoint")),
                         key=self.launched.get, reverse=True)
        adjoints = []
        for k in kernels:
            try:
                adjoint = k.variant_ir("adjoint")
            except Exception:     # noqa: BLE001  speculative: raised again if .grad() runs
                continue
            if adjoint.body:
                adjoints.append(adjoint)
        compile_ahead(adjoints, self.target, self.config.debug, self.config.fast_math)
