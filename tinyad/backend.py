"""Backends: what runs a traced kernel, and where the fields' values live.

To add a backend, subclass `Backend` in its own package and name its module and class in
`BACKENDS` below; `ti.init(mode=<name>)` then selects it, and nothing else in tinyad changes.

    interp  interp/backend.py    InterpBackend: the tree-walking interpreter
    fast    compile/backend.py   FastBackend: numba on the CPU, or CUDA with device mirrors

tinyad/kernel.py keeps one `TracedKernel` per traced kernel: its IR variants ("primal",
"adjoint"; how each is derived is listed there). A backend sees only IR and fields:

  * `prepare(kernel_ir)` turns one variant into a `Program` (an interpreter closure tree, a
    numba kernel), once; `program.run(scalars, rng)` runs it. tinyad/launch.py launches it:
    the same sequence of rule checks before and after the run, for every backend;
  * `backward_starts(first)` is called before the first adjoint is prepared (a backward pass
    has begun): fast mode starts compiling the other adjoints ahead then;
  * `storage` says where a field's array lives (`FieldStorage`): host numpy by default, a device
    mirror for CUDA. `tinyad/field.py` reads and writes its values only through it;
  * `checks` are the autodiff rule checker's hooks that tinyad/ad.py (the Tape) and field.py
    (Python-scope accesses) call (`CheckHooks`): no-ops for a backend that runs no checks;
  * `checker`, for a backend that checks, is the rule checker the launch sequence drives
    (tinyad/check/checker.py, the same for every backend: it runs the kernels' recording
    variants as any other, with `prepare`).

`BACKENDS` is the only place that maps a mode's name to its implementation; the modules are
imported when a mode is first used, so interp mode never imports numba.
"""
from __future__ import annotations

import contextlib
import importlib
import math
from abc import ABC, abstractmethod
from typing import Any, Protocol

import numpy as np

BACKENDS = {
    "interp": ("tinyad.interp.backend", "InterpBackend"),
    "fast": ("tinyad.compile.backend", "FastBackend"),
}

# Where a NaN or an infinity a derivative launch wrote came from, found by re-running it in the
# interpreter (tinyad/check/nonfinite.py): given to a backend whose `nonfinite_locator` is None.
NONFINITE_LOCATOR = ("tinyad.interp.backend", "locate")


class Program(Protocol):
    """One IR variant made runnable by a backend."""

    def run(self, scalars: tuple, rng: np.random.Generator | None = None) -> Any:
        """Run once with the kernel's scalar arguments, `rng` seeding ti.random() (None: a
        generator seeded with 0); -> the kernel's return value or None."""


class FieldStorage:
    """Where fields' values live. This base class is host storage: each field's own numpy array
    (`field.host_array`) holds its values. A backend whose kernels work on other copies (a GPU's
    memory) overrides these methods and keeps the copies itself."""

    def to_host(self, field) -> np.ndarray:
        """The field's host array, holding its current values (brought back if need be)."""
        return field.host_array

    def invalidate(self, field) -> None:
        """The caller has just written the host array: any other copy of it is stale."""

    def fill(self, field, value) -> None:
        """Set every element to `value`, where the field lives (no copy in between). Host
        storage keeps no other copy to invalidate (no call: a Tape fills gradients at each
        entry and exit); a storage that keeps one overrides fill (compile/devicemirror.py)."""
        field.host_array[...] = value

    def assign(self, field, array: np.ndarray) -> None:
        """Overwrite every element with `array` (of the field's full shape)."""
        field.host_array[...] = array
        self.invalidate(field)

    def set_element(self, field, index, value) -> None:
        """Write one element (`index` into the field's array; `value` of its element shape)."""
        self.to_host(field)[index] = value
        self.invalidate(field)

    def snapshot(self, field):
        """A copy of the field's values where they live now, for `restore` (tinyad/undo.py)."""
        return self.to_host(field).copy()

    def restore(self, field, snapshot) -> None:
        """Put back the values `snapshot` took."""
        self.assign(field, snapshot)


HOST_STORAGE = FieldStorage()


class CheckHooks:
    """The rule checker's hooks. These do nothing: the hooks of a backend without checks."""

    def begin_tape(self, loc=None) -> None:
        """A Tape starts recording, at the user's line `loc` (its `with`)."""

    def end_tape(self, loc=None) -> None:
        """The Tape stops recording; its backward pass follows, from the user's line `loc`."""

    def tape_differentiated(self) -> None:
        """The Tape's backward pass has run."""

    @contextlib.contextmanager
    def custom_gradient(self, name: str = ""):
        """Around a custom gradient function (ti.ad.grad_for, named `name`) the Tape runs."""
        yield

    @contextlib.contextmanager
    def custom_primal(self):
        """Around a grad_replaced function a Tape records: the adjoints of its kernels never
        run (its grad_for does instead), so what they read is not the Tape's to keep."""
        yield

    def python_read(self, field, index, value) -> None:
        """Python scope read one element of a field."""

    def python_will_write(self, field, loc=None) -> None:
        """Python scope is about to write some of the field's elements (`loc`: the user's line
        where tinyad writes for the user, such as a Tape clearing gradients; None otherwise)."""

    def python_write(self, field, index, loc=None) -> None:
        """Python scope wrote one element (`index`) or the whole field (`index` None), at the
        user's line `loc` (None: the checker finds it)."""

    def gradients_set(self, fields, loc=None, grads=None) -> None:
        """A Tape has set these whole gradient (or dual) fields for the user's line `loc`
        (cleared them on entry, seeded its loss's): what python_will_write and python_write
        would say of each, in one call. `grads`: those of them that are gradients (None: not
        said)."""

    def python_copy(self, dst, src) -> None:
        """dst.copy_from(src) has run (after its python_write)."""

    def gradient_read(self, grad, tape_loc=None, index=None) -> None:
        """Python scope read a gradient field (x.grad[i], x.grad.to_numpy()), inside the Tape
        at line `tape_loc` if one is recording; `index`: the element read (None: all)."""

    def taped_no_grad_launch(self, launch) -> None:
        """A Tape recorded a launch of a no-grad kernel (`launch`: the checker's record of it)."""

    def tape_loss_unwritten(self, loss, loc) -> None:
        """The Tape at line `loc` ends, and nothing recorded in it wrote its loss."""

    def warn_once(self, report) -> None:
        """Show a warning's report, once per pair of lines it names."""

    def problems(self) -> list:
        """The violations found so far, one per bug (check="warn" collects them)."""
        return []


NO_CHECKS = CheckHooks()


class CheckerHooks(CheckHooks):
    """Hooks that pass every event to a rule checker with the same methods (each backend's
    checker builds on tinyad/check/launches.py's LaunchChecker)."""

    def __init__(self, checker):
        self.checker = checker
        # The events the checker takes as they come are its own methods, bound here: no frame
        # in between (a Tape sends five, and a Tape of a small kernel costs mostly such calls)
        self.begin_tape, self.end_tape = checker.begin_tape, checker.end_tape
        self.tape_differentiated = checker.tape_differentiated
        self.gradients_set, self.python_copy = checker.gradients_set, checker.python_copy
        self.custom_gradient, self.custom_primal = checker.custom_gradient, checker.custom_primal
        self.python_read = checker.python_read

    def python_will_write(self, field, loc=None):
        self.checker.before_write(field)
        if field.role == "grad" and loc is None:
            self.checker.lost.gradient_will_change(field)

    def python_write(self, field, index, loc=None):
        self.checker.python_write(field, index, loc)
        self.checker.lost.sweeps.written(field)

    def gradient_read(self, grad, tape_loc=None, index=None):
        self.checker.lost.gradient_read(grad, tape_loc, index=index)

    def taped_no_grad_launch(self, launch):
        if launch is not None:
            self.checker.lost.no_grad_launch(launch)

    def tape_loss_unwritten(self, loss, loc):
        self.checker.lost.loss_unwritten(loss, loc)

    def warn_once(self, report):
        self.checker.lost.warn_once(report)

    def problems(self):
        return list(self.checker.problems.values())


class ProgramStopped(Exception):
    """A checked replay's program stopped part way: a look for NaN and infinity found one
    (compile/sequence.py). The fields hold what it wrote until then."""


class Backend(ABC):
    """A way to run kernels; one instance per `ti.init` (it may keep per-init state)."""

    name: str = ""
    storage: FieldStorage = HOST_STORAGE
    checks: CheckHooks = NO_CHECKS
    # The rule checker tinyad/launch.py drives around each launch (check/launches.py's
    # LaunchChecker or one built on it), with the backend's own steps; None: no checks.
    checker = None
    # Told the time of each launch, checks included (interp/progress.py warns when a program
    # is slow); None: launches are not timed.
    progress = None
    # Whether a launch can raise part way (bounds or rule checks inside kernels): then each
    # launch, and each Tape, saves the fields it changes first, to put them back if it raises
    # (tinyad/undo.py). Where launches are compiled and unchecked the copies would cost as much
    # as a memory-bound forward pass, so they are left out.
    launches_can_fail: bool = True
    # True: the program checks every index it uses as it runs (the interpreter; fast mode with
    # ti.init(debug=True)), so the error names the element reached. False: a launch the plan
    # from its IR shows certainly reaching out of bounds is refused before it runs
    # (tinyad/check/reached.py), and the rest are not checked.
    checks_every_index: bool = False
    # True: a program reads every field through the IR's field objects at each launch, so
    # one program serves a kernel's ndarray arguments bound to any arrays of their shape
    # (tinyad/arrayparams.py). False: a program per set of arrays, from the IR bound to them.
    arrays_as_parameters: bool = False

    def __init__(self, config, rng: np.random.Generator):
        self.config = config       # ti.init's settings (tinyad/runtime.py Config)
        self.rng = rng             # ti.init's random generator: seeds every ti.random()
        self.notices: list[str] = []   # one-line notes for the user, shown by ti.init

    @abstractmethod
    def prepare(self, kernel_ir) -> Program:
        """Make one IR variant runnable (called once per traced kernel and variant)."""

    def launching(self, traced, variant: str) -> None:
        """A launch of `traced`'s `variant` begins, before its program is asked for (and so,
        at its first launch, prepared)."""

    @staticmethod
    def all_finite(values: np.ndarray) -> bool:
        """Is every value of a small float array (a gradient of a few floats) finite? Here one
        Python sum: a NaN or an infinity makes it non-finite, and so may an overflow of the
        sum, which the exact look that follows settles (tinyad/check/nonfinite.py)."""
        return math.isfinite(sum(values.ravel().tolist()))

    # True: `sequence` can run a captured program (tinyad/capture.py, tinyad/sequence.py)
    runs_sequences: bool = False

    def sequence(self, program: list, buffers=()):
        """A runner of a captured program (its events, loops rolled): `run()` runs it once and
        says True, or False while it is not ready (the function then runs as plain Python);
        `wait()` waits until it is. None: the captured function always runs as plain Python.
        `buffers`: the arrays its Copy events copy into (a checked replay's,
        tinyad/checkedreplay.py); where its CheckFinite looks find a NaN, `run()` raises
        ProgramStopped."""
        return None

    def sync(self) -> None:
        """Wait until every kernel launched so far has finished (ti.sync()). Kernels on the CPU
        and in the interpreter finish before their launch returns."""

    def backward_starts(self, first) -> None:
        """The adjoint of `first` (a TracedKernel) is about to be prepared for the first time.
        The first such call since ti.init means a backward pass has begun."""

    def locate_nonfinite(self, traced, variant: str, scalars, targets):
        """Where a NaN or infinity that a launch of `traced`'s `variant` wrote into one of
        `targets` came from (tinyad/check/nonfinite.py), for a backend that checks: -> a
        NonFinite, or None when the launch wrote none."""
        raise NotImplementedError(f"the {self.name} backend does not locate NaNs")


def create(mode: str, config, rng: np.random.Generator) -> Backend:
    """The backend registered for `mode`, for one ti.init."""
    module, name = BACKENDS[mode]
    backend = getattr(importlib.import_module(module), name)(config, rng)
    if getattr(backend, "nonfinite_locator", False) is None:
        module, name = NONFINITE_LOCATOR
        backend.nonfinite_locator = getattr(importlib.import_module(module), name)
    return backend
