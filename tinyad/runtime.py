"""Process-wide tinyad state set by `ti.init`: defaults, the mode, the random source, the fields.

Taichi keeps this state global too (`ti.init` resets it); tinyad keeps all of it in one object.
"""
from __future__ import annotations

import contextvars
import difflib
import os
from dataclasses import dataclass, field

import numpy as np

from tinyad import backend as backends
from tinyad.core import types as T
from tinyad.core.errors import TinyadTypeError, TinyadValueError
from tinyad.frontend import lang
from tinyad.notices import note

MODES = tuple(backends.BACKENDS)
CHECKS = ("error", "warn", "off")


def _from_environment(name: str, default: str, allowed: tuple) -> str:
    value = os.environ.get(name, default)
    return value if value in allowed else default


@dataclass
class Config:
    arch: str = "cpu"
    default_fp: T.DType = T.f32
    default_ip: T.DType = T.i32
    random_seed: int = 0
    debug: bool = False
    fast_math: bool = True          # fast mode may reassociate float math (compile/pysource.py)
    print_ir: bool = False          # print each kernel's IR, and its derivatives', when made
    # TINYAD_MODE / TINYAD_CHECK choose without editing a program (also before any ti.init)
    mode: str = field(default_factory=lambda: _from_environment("TINYAD_MODE", "interp", MODES))
    check: str = field(default_factory=lambda: _from_environment("TINYAD_CHECK", "error", CHECKS))
    # with checks on: stop at a NaN or infinity new in a gradient, and say where it came from
    check_nonfinite: bool = True


class _MadeOnFirstUse:
    """Runtime.backend before ti.init: made from the defaults, then kept on the instance."""

    def __get__(self, owner_instance, owner):
        if owner_instance is None:
            return self
        made = owner_instance.backend = backends.create(
            owner_instance.config.mode, owner_instance.config, owner_instance.rng)
        return made


@dataclass
class Runtime:
    config: Config = field(default_factory=Config)
    fields: list = field(default_factory=list)   # every field created since the last init
    generation: int = 0                           # bumped by init: traced kernels are stale
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    # `backend`: what runs kernels and stores fields in this mode (tinyad/backend.py), set by
    # init. An instance attribute, not a property: every launch asks for it several times.
    # Made on first use without ti.init by a non-data descriptor (the attribute it sets hides
    # it), not by __getattr__, which would slow every attribute read of `runtime`.
    backend = _MadeOnFirstUse()


runtime = Runtime()

class Recorder:
    """What records kernel launches while it is the active recorder: the Tape (tinyad/ad.py),
    and ti.ad.verify's LaunchRecorder (tinyad/gradverify.py)."""

    # False: a grad_replaced function is recorded as one call to its custom gradient. True: the
    # kernels inside it are recorded one by one (verify replays the primal computation).
    records_primal_kernels = False

    def record(self, kernel, args, kwargs, launch=None) -> None:
        """A kernel was launched; `launch` is the checker's record of it (or None)."""
        raise NotImplementedError

    def record_custom(self, grad_fn, args, kwargs, primal=None) -> None:
        """A grad_replaced function `primal` ran; `grad_fn` is its gradient."""
        raise NotImplementedError


# The Recorder currently recording kernel launches, if any.
active_recorder: contextvars.ContextVar = contextvars.ContextVar("tinyad_recorder", default=None)


# The ti.capture recording of a call, if one is being captured (tinyad/capture.py).
active_capture: contextvars.ContextVar = contextvars.ContextVar("tinyad_capture", default=None)


def python_storage():
    """Where Python-scope field operations read and write (tinyad/field.py, tapeops.py): the
    backend's storage, seen through the recording while a call is captured."""
    recording = active_capture.get()
    if recording is None or recording.storage is None:
        return runtime.backend.storage
    return recording.storage


def captured_access(fld, access: str) -> None:
    """Python scope reads ("read") or loads ("load") a field's values: inside a captured call,
    values later calls would not read again (tinyad/capture.py refuses them)."""
    recording = active_capture.get()
    if recording is not None:
        recording.python_access(fld, access)


# The ti.ad.FwdMode whose context is open, if any: kernels launched then run their tangent variant.
active_forward_mode: contextvars.ContextVar = contextvars.ContextVar("tinyad_forward_mode",
                                                                    default=None)


# Taichi's ti.init options that have no meaning in tinyad: accepted, and ignored with a note.
IGNORED_OPTIONS = {"offline_cache", "offline_cache_file_path", "cpu_max_num_threads",
                   "kernel_profiler", "log_level", "ad_stack_size", "device_memory_GB",
                   "device_memory_fraction", "advanced_optimization",
                   "packed", "dynamic_index", "excepthook", "verbose", "print_kernel_llvm_ir",
                   "default_gpu_block_dim", "async_mode", "flatten_if", "make_thread_local",
                   "opt_level", "real_matrix_scalarize", "check_out_of_bound", "gdb_trigger",
                   "experimental_real_function", "short_circuit_operators", "debug_info"}


KNOWN_OPTIONS = ("arch", "default_fp", "default_ip", "random_seed", "debug", "mode", "check",
                 "fast_math", "print_ir", "check_nonfinite")


def init(arch=None, default_fp=None, default_ip=None, random_seed: int = 0, debug: bool = False,
         mode: str | None = None, check: str | None = None, fast_math: bool = True,
         print_ir: bool = False, check_nonfinite: bool = True, **options) -> None:
    """`ti.init`: start afresh. Fields and traced kernels from before are forgotten."""
    mode = mode or os.environ.get("TINYAD_MODE", "interp")
    check = check or os.environ.get("TINYAD_CHECK")
    if mode not in backends.BACKENDS:
        raise TinyadValueError(f"ti.init(mode={mode!r}): mode must be one of "
                               f"{tuple(backends.BACKENDS)}", hint="the device is chosen with "
                               "arch= (ti.cpu, ti.cuda); mode= picks interp or fast")
    check = check or "error"
    if check not in CHECKS:
        raise TinyadValueError(f"ti.init(check={check!r}): check must be one of {CHECKS}",
                               hint="'error' stops at a wrong gradient, 'warn' goes on, 'off' "
                                    "does not check")
    ignored = sorted(set(options) & IGNORED_OPTIONS)
    unknown = sorted(set(options) - IGNORED_OPTIONS)
    if unknown:
        close = [c for u in unknown for c in difflib.get_close_matches(u, KNOWN_OPTIONS, n=1)]
        raise TinyadTypeError(f"ti.init() got unknown option(s): {', '.join(unknown)}",
                              hint=f"did you mean {', '.join(close)}?" if close else
                              f"its options are {', '.join(KNOWN_OPTIONS)}")
    if ignored:
        one = len(ignored) == 1
        note(f"ti.init: {', '.join(ignored)} {'has' if one else 'have'} no meaning in tinyad "
             f"and {'is' if one else 'are'} ignored")
    arch = arch or os.environ.get("TINYAD_ARCH") or "cpu"     # as Taichi's TI_ARCH
    runtime.config = Config(arch=str(arch), default_fp=default_fp or T.f32,
                            default_ip=default_ip or T.i32, random_seed=random_seed,
                            debug=debug, fast_math=bool(fast_math), mode=mode, check=check,
                            print_ir=bool(print_ir), check_nonfinite=bool(check_nonfinite))
    T.set_typing_defaults(T.TypingDefaults(runtime.config.default_fp, runtime.config.default_ip))
    runtime.fields = []
    runtime.generation += 1
    runtime.rng = np.random.default_rng(random_seed)
    lang.set_python_scope_rng(runtime.rng)
    runtime.backend = backends.create(mode, runtime.config, runtime.rng)
    for notice in runtime.backend.notices:
        note(notice)


def sync():
    """Wait for the kernels launched so far to finish (they run asynchronously on a GPU)."""
    runtime.backend.sync()


def reset():
    """`ti.reset()`, as Taichi's: every field and kernel is forgotten and the configuration is
    the default again (a program usually calls ti.init next). Programs that fit a model from
    several starts call it between runs."""
    init()
