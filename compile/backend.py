"""Fast mode as a backend (tinyad/backend.py): kernels compiled by numba, for the CPU or CUDA.

Besides compiling and launching, it owns two things a fast-mode program needs across kernels:

  * compiling ahead (compile/ahead.py): the adjoint of a kernel that touches a field with a
    gradient is queued for a helper process at the kernel's first launch (before that launch
    compiles the kernel itself), so it compiles while this process compiles and runs the
    forward pass, inside a Tape or not (Warp, too, builds every kernel's adjoint with it); when
    the first adjoint is needed (a backward pass has begun), the adjoints of any other kernels
    launched so far are queued too, latest first;
  * on CUDA, the fields' device copies (compile/devicemirror.py), its `storage`.

With checks on (ti.init's check, "error" by default) it runs the rule checker every backend
runs (tinyad/check/checker.py, around each launch by tinyad/launch.py), with the recording
variants it asks for compiled as any kernel.
"""
from __future__ import annotations

from tinyad.backend import Backend, CheckerHooks
from tinyad.check.checker import CheckingBackend
from tinyad.compile import (
    ahead,
    backend_for,
    compile_ahead,
    compile_kernel,
    cuda_unavailable_reason,
)
from tinyad.compile.finite import all_finite
from tinyad.compile.sequence import sequence_runner
from tinyad.core import ir


class FastBackend(CheckingBackend, Backend):
    name = "fast"
    arrays_as_parameters = True   # compiled code takes every array as a parameter
    all_finite = staticmethod(all_finite)    # compiled (compile/finite.py)

    def __init__(self, config, rng):
        super().__init__(config, rng)
        self.target = backend_for(config.arch)          # "cpu" or "cuda"
        if str(config.arch) == "cuda" and self.target != "cuda":
            self.notices.append(f"ti.init(arch=cuda): {cuda_unavailable_reason()}, fast mode "
                                "runs on the CPU")
        if self.target == "cuda":
            from tinyad.compile.devicemirror import DeviceMirror  # noqa: PLC0415  (imports CUDA)
            self.storage = DeviceMirror()
        # Compiled kernels raise part way only with debug=True's bounds checks (tinyad/undo.py)
        self.launches_can_fail = self.checks_every_index = bool(config.debug)
        self.launched: dict = {}         # traced kernel -> number of its latest primal launch
        self.launches = 0
        self.adjoints_queued = False     # compile/ahead.py has been given the adjoints
        self.asked_ahead: set = set()    # traced kernels whose adjoints were queued ahead
        if config.check != "off":      # (else Backend's: no checker, no-op hooks)
            self.checker = self.start_checker(config)
            self.checks = CheckerHooks(self.checker)
        # (traced, variant, scalars, targets) -> where a NaN or infinity a launch wrote came
        # from: interp/nanwatch.py's locate, given by tinyad/backend.py's create()
        self.nonfinite_locator = None
        if self.target == "cpu":
            ahead.start()    # ready by the first adjoint queued (compile/ahead.py)

    def sync(self):
        if self.target == "cuda":
            from numba import cuda  # noqa: PLC0415
            cuda.synchronize()

    runs_sequences = True

    def sequence(self, program, buffers=()):
        """A captured program as one compiled function where it can be (compile/sequence.py)."""
        return sequence_runner(program, self, buffers)

    def prepare(self, kernel_ir):
        config = self.config
        mirror = self.storage if self.target == "cuda" else None
        return compile_kernel(kernel_ir, self.target, config.debug, config.fast_math,
                              mirror=mirror)

    def launching(self, traced, variant):
        if variant == "primal":
            if traced not in self.launched:
                self._first_launch(traced)
            self.launches += 1
            self.launched[traced] = self.launches

    def locate_nonfinite(self, traced, variant, scalars, targets):
        """The interpreter's re-run of one launch, on the fields' host copies."""
        for fld in ir.fields_of(traced.variant_ir(variant).body):
            self.checker.host(fld)       # (brought back from the device, on CUDA)
        return self.nonfinite_locator(traced, variant, scalars, targets)

    def _first_launch(self, traced) -> None:
        """Before `traced`'s first launch compiles it: if it touches a field with a gradient, it
        will likely be differentiated, so its adjoint starts compiling in the helper process
        now, while this one compiles and runs the forward pass (cold, each of mpm's two large
        adjoints takes seconds). A program that never differentiates it spends a helper's
        time, not this process's."""
        if self.target != "cpu" or traced in self.asked_ahead or not ahead.enabled():
            return
        if any(f.role == "primal" and f.has_grad and f.grad.requested
               for f in ir.fields_of(traced.ir.body)):
            self._compile_adjoints_ahead([traced])

    def backward_starts(self, first) -> None:
        """Start compiling the adjoints of the kernels launched so far, latest first, in a
        helper process while this one compiles `first`'s."""
        if self.adjoints_queued:
            return
        self.adjoints_queued = True
        self._compile_adjoints_ahead(sorted((k for k in self.launched if k is not first),
                                            key=self.launched.get, reverse=True))

    def _compile_adjoints_ahead(self, kernels) -> None:
        adjoints = []
        for k in kernels:
            if k in self.asked_ahead or k.has_program("adjoint"):
                continue
            self.asked_ahead.add(k)
            try:
                adjoint = k.program_ir("adjoint")
            except Exception:     # noqa: BLE001  speculative: raised again if .grad() runs
                continue
            if adjoint.body:
                adjoints.append(adjoint)
        if adjoints:
            compile_ahead(adjoints, self.target, self.config.debug, self.config.fast_math)

