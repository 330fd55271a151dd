"""`@ti.capture`: a Python function of kernel launches and Tapes, run as one compiled program.

    @ti.capture
    def train_step():
        with ti.ad.Tape(loss=U):
            compute_U()
        advance()

    for _ in range(1000):
        train_step()          # the first call runs and is captured; later calls replay

A Taichi program pays Python for every launch: binding arguments, the Tape's bookkeeping, the
dispatch. A function that launches the same kernels every call can pay it once: its first call
runs as usual while tinyad records what it does to fields (tinyad/sequence.py: launches of every
variant with their scalars, fills, element writes; a time loop rolled into a loop), and each later
call runs that recording, compiled by the backend (compile/sequence.py: one numba function on the
CPU). Warp's `wp.ScopedCapture` records a Tape's launches into a CUDA graph the same way; JAX's
`jit` traces a function once. Like those, the Python between the launches does not run again,
so what it computes is taken as it was when captured, and tinyad says where that cannot hold:

* the function's arguments are its inputs: each new set of values (numbers by value, fields and
  other objects by identity) is captured once, and a later call with the same ones replays it;
* numbers the function reads from its globals, its closure, or its arguments' attributes
  (`self.dt`) are looked at on every call: a change captures the function again;
* a field read from Python inside it (`x[i]`, `to_numpy()`, printing a field), a load from numpy or
  another field (`from_numpy`, `copy_from`), a kernel's return value, a random number drawn in
  Python, a kernel taking ndarrays: the capture stops with an error naming the line (their
  values would be stale at the next call); do them before or after the captured call;
* fields written from Python between calls are seen: the program reads the fields where they are.

With the rule checks on (the default), fast mode on the CPU replays checked: a call runs plainly,
fully checked, while tinyad/checkwatch.py watches the checker; if its checks reported nothing and
decided from field values only by tests a replay can make again, later calls replay it with the
checks that remain (looks for NaN, copies the checker keeps, those tests) compiled in, and the checker is left as the plain call would
leave it (tinyad/checkedreplay.py). Otherwise, and in interp mode, with debug=True, on CUDA with
checks on, or when called inside a Tape, FwdMode or another capture, the function runs as plain
Python, checked launch by launch.
"""
from __future__ import annotations

import functools
import numbers
import sys
import textwrap
import types

import numpy as np

from tinyad.checkedreplay import CheckedReplay, free_retired
from tinyad.checkwatch import Watch
from tinyad.core.errors import TinyadRuntimeError, TinyadTypeError
from tinyad.core.srcloc import user_loc
from tinyad.frontend import lang
from tinyad.notices import note
from tinyad.runtime import (
    active_capture,
    active_forward_mode,
    active_recorder,
    runtime,
)
from tinyad.sequence import Fill, Launch, SetElement, format_program, roll
from tinyad.undo import active_undo

MAX_CAPTURES = 8    # sets of argument values one captured function keeps a program for


def capture(fn=None):
    """`@ti.capture`: run this function's kernel launches, Tapes and fills as one compiled
    program from its second call on (see this module's docstring for what that asks of it)."""
    if fn is None:
        return capture
    return Captured(fn)


class Captured:
    """A captured function: its programs, one per set of argument values."""

    def __init__(self, fn):
        self.fn = fn
        self._programs: dict = {}    # key of the arguments -> _Capture
        self.replays = 0             # calls run as a captured program (for tests and lessons)
        self._told = False
        for name in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(self, name, getattr(fn, name, None))
        self.__name__ = self.__name__ or type(fn).__name__

    def __get__(self, instance, owner):
        return self if instance is None else functools.partial(self, instance)

    def __call__(self, *args, **kwargs):
        if active_capture.get() is not None:
            return self.fn(*args, **kwargs)       # (the capture around this call records it)
        why = _why_plain()
        key = _key(args, kwargs)
        found = self._programs.get(key) if why is None else None
        if found is not None and not found.current(args, kwargs):
            found = None
        if found is not None and found.replay():
            self.replays += 1
            return None
        checker = runtime.backend.checker if why is None else None
        if checker is None and found is not None:
            return self.fn(*args, **kwargs)    # (its program is still compiling)
        if checker is not None:
            free_retired(checker)
        watch = None
        if checker is not None and (found is None or found.watch_now()):
            watch = Watch(checker)
        # Recorded, even where it will not replay: a captured function is refused the same
        # things in every mode, so that what runs in one runs in the others
        events = self._record(args, kwargs, replayable=why is None, watch=watch)
        if why is not None:
            self._tell(why)
            return None
        if checker is not None:
            self._checked_capture(key, found, watch, events, args, kwargs)
            return None
        program = roll(events)
        runner = runtime.backend.sequence(program)
        self._programs.pop(key, None)
        if runner is not None:
            self._keep(key, _Capture(self.fn, program, runner, args, kwargs))
        return None

    def _checked_capture(self, key, found, watch, events, args, kwargs) -> None:
        """After a plain checked call: its checked replay, where its watch allows one."""
        if watch is None:           # (not watched: it missed before, and waits its turn)
            return
        watched = watch.finish(events)
        if watched is None:
            misses = found.misses + 1 if found is not None else 1
            self._keep(key, _Capture(self.fn, None, None, args, kwargs, misses))
            self._tell_checked(watch.why_not)
            return
        before = found.checked if found is not None else None
        checked = CheckedReplay(watched, events, self.__name__, before)
        self._keep(key, _Capture(self.fn, checked.program, checked.runner, args, kwargs,
                                 checked=checked))

    def _keep(self, key, capture) -> None:
        self._programs.pop(key, None)
        self._programs[key] = capture
        while len(self._programs) > MAX_CAPTURES:
            del self._programs[next(iter(self._programs))]

    def _record(self, args, kwargs, replayable: bool, watch=None) -> list:
        """Run the function once as plain Python; -> the events it recorded (where a replay
        will not follow, only the refusals are made: the checks' own work goes unrecorded).
        `watch`: the rule checker's watch (tinyad/checkwatch.py), where checks are on."""
        recording = _Recording(self.__name__, replayable)
        token = active_capture.set(recording)
        rng = lang.set_python_scope_rng(_RefusedRandom(recording))
        try:
            if watch is not None:
                watch.start(recording)
            result = self.fn(*args, **kwargs)
        finally:
            if watch is not None:
                watch.stop()
            lang.set_python_scope_rng(rng)
            active_capture.reset(token)
        if result is not None:
            raise TinyadTypeError(f"ti.capture: {self.__name__} returned a value "
                                  f"({type(result).__name__}); a captured function's Python "
                                  "runs only when it is captured", user_loc(),
                                  hint="return nothing: leave results in fields and read them "
                                       "after the call")
        return recording.events

    def wait(self) -> None:
        """Until the programs captured so far are compiled (they compile beside the program,
        which meanwhile runs the function as plain Python): for timing the replays alone."""
        for found in self._programs.values():
            if found.runner is not None:
                found.runner.wait()

    def program(self, *args, **kwargs) -> str:
        """The captured program for these arguments, as text (captured on first use)."""
        key = _key(args, kwargs)
        if key not in self._programs:
            self(*args, **kwargs)
        found = self._programs.get(key)
        if found is None or found.program is None:
            why = _why_plain() or "its checks cannot be replayed (see the note)"
            return textwrap.fill(f"{self.__name__} runs as plain Python here: {why}",
                                 width=79, subsequent_indent="  ")
        return format_program(found.program, self.__name__)

    def _tell(self, why: str) -> None:
        """Say once why calls run launch by launch, where the user could choose otherwise."""
        if not self._told and why.startswith(("mode=", "checks")):
            way_out = ("ti.init(mode='fast') runs it as one compiled program, checks included"
                       if why.startswith("mode=") else
                       "with check='off' it runs as one compiled program there")
            note(f"ti.capture: {self.__name__} runs launch by launch: {why} ({way_out})")
        self._told = True

    def _tell_checked(self, why: str) -> None:
        if not self._told:
            note(f"ti.capture: {self.__name__} runs launch by launch with checks on: {why} "
                 "(tinyad tries again later; with check='off' it runs as one compiled program)")
        self._told = True


def _why_plain() -> str | None:
    """Why calls run as plain Python now, or None when a captured program may run (checked
    where checks are on: tinyad/checkedreplay.py)."""
    backend, config = runtime.backend, runtime.config
    if not backend.runs_sequences:
        checking = ", checking every access" if config.check != "off" else ""
        return f"mode={config.mode!r} runs each launch in the interpreter{checking}"
    if config.check != "off" and getattr(backend, "target", None) != "cpu":
        return (f"checks are on (check={config.check!r}) and a checked replay runs on the CPU "
                "only: each launch is checked as it runs")
    if config.debug:
        return "debug=True checks every index as it runs"
    if active_recorder.get() is not None or active_forward_mode.get() is not None or \
            active_undo.get() is not None:
        return "it is called inside a Tape or FwdMode, which records its launches"
    return None


class _Capture:
    """One captured program, and what must hold for it to replay."""

    def __init__(self, fn, program, runner, args, kwargs, misses=0, checked=None):
        self.program, self.runner = program, runner
        self.checked = checked                  # its CheckedReplay, where checks are on
        self.misses = misses     # checked calls in a row that could not be replayed
        self.unwatched = 2 ** min(misses, 6) - 1 if misses else 0   # plain calls before a watch
        self.generation = runtime.generation
        self.backend = runtime.backend
        self.field_count = len(runtime.fields)
        self.read = _read_names(fn)
        self.values = self._values(args, kwargs)

    def replay(self) -> bool:
        """Run the program for the call; False where it did not (still compiling; checked: the
        checker's state or a NaN asks for a plain call)."""
        if self.checked is not None:
            return self.checked.replay()
        return self.runner is not None and self.runner.run()

    def watch_now(self) -> bool:
        """Is the next plain checked call watched for a replay? (After calls that could not
        be, less and less often: their checks looked at values, say, as most calls' will.)"""
        if self.unwatched:
            self.unwatched -= 1
            return False
        return True

    def current(self, args, kwargs) -> bool:
        return (runtime.generation == self.generation and runtime.backend is self.backend and
                len(runtime.fields) == self.field_count and
                self._values(args, kwargs) == self.values)

    def _values(self, args, kwargs) -> tuple:
        """The numbers the function reads besides its arguments' own values."""
        outside = tuple(_plain_value(getter()) for getter in self.read)
        attributes = tuple(_attributes(a) for a in (*args, *kwargs.values()))
        return outside + attributes


def _read_names(fn) -> list:
    """Getters of the globals and closure variables `fn`'s code reads that hold plain values."""
    code, getters = getattr(fn, "__code__", None), []
    if code is None:            # (a kernel captured by itself: its scalars are its arguments)
        return getters
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(const.co_names)
    for name in sorted(names):
        if name in fn.__globals__ and _plain_value(fn.__globals__[name]) is not _OTHER:
            getters.append(functools.partial(fn.__globals__.get, name))
    for cell in fn.__closure__ or ():
        try:
            if _plain_value(cell.cell_contents) is not _OTHER:
                getters.append(functools.partial(getattr, cell, "cell_contents"))
        except ValueError:      # (a cell not yet filled)
            continue
    return getters


_OTHER = object()


def _plain_value(value):
    """A number or string as itself, a tuple or list of them as a tuple (a snapshot of the
    list: one changed in place is seen); anything else as _OTHER."""
    if isinstance(value, (numbers.Number, str, type(None))):
        return value
    if isinstance(value, (tuple, list)):
        inner = tuple(_plain_value(v) for v in value)
        return _OTHER if any(v is _OTHER for v in inner) else (type(value).__name__, inner)
    return _OTHER


def _attributes(value) -> tuple:
    """An object argument's plain attributes (a data-oriented class's `self.dt`)."""
    if _plain_value(value) is not _OTHER or not hasattr(value, "__dict__"):
        return ()
    return tuple((k, v) for k, v in vars(value).items() if _plain_value(v) is not _OTHER)


def _key(args, kwargs):
    parts = [_key_part(a) for a in args] + [(k, _key_part(v)) for k, v in sorted(kwargs.items())]
    return tuple(parts)


def _key_part(value):
    plain = _plain_value(value)
    return ("id", id(value)) if plain is _OTHER else (type(value).__name__, plain)


class _Recording:
    """What the capture of one call sees: the events, and the refusals of what it cannot
    replay. tinyad/kernel.py and tinyad/field.py (through `storage`) report to it."""

    def __init__(self, name: str, replayable: bool = True):
        self.name = name
        self.events: list = []
        self.storage = _RecordingStorage(self) if replayable else None
        self.launching = (None, -1)

    def launch(self, traced, variant: str, scalars) -> None:
        if getattr(traced, "mapping", None) is not None:
            self.refuse(f"launches {traced.ir.name} with ndarray arguments", "capture takes "
                        "kernels on fields; launch this one outside the captured function")
        self.events.append(Launch(traced, variant, tuple(_python_number(s) for s in scalars)))
        # (the frame that launches it, and its event: where the checks a watch sees during
        # the launch come, tinyad/checkwatch.py)
        self.launching = (sys._getframe(1), len(self.events) - 1)

    def returned(self, kernel_name: str) -> None:
        self.refuse(f"uses the value {kernel_name} returns", "write it to a field and read that "
                    "after the call")

    def python_access(self, fld, access: str) -> None:
        if access == "load":
            self.refuse(f"loads values into {fld.name} from Python (from_numpy, copy_from)",
                        "load them before the captured call")
        self.refuse(f"reads {fld.name} in Python scope", "read fields after the captured call "
                    "(or in a kernel)")


    def refuse(self, what: str, hint: str) -> None:
        raise TinyadRuntimeError(f"ti.capture: {self.name} {what}: its Python runs only when it "
                                 "is captured, so later calls would replay a stale value",
                                 user_loc(), hint=hint)


class _RefusedRandom:
    """Python scope's ti.random() while a call is captured: its number would be stale."""

    def __init__(self, recording: _Recording):
        self.recording = recording

    def _refuse(self, *_args):
        self.recording.refuse("draws a random number in Python scope (ti.random())",
                              "draw it in a kernel, or pass it in as an argument")

    random = integers = _refuse


class _RecordingStorage:
    """The backend's storage as Python-scope field operations see it while a call is captured:
    fills and element writes are recorded; any other change is refused."""

    def __init__(self, recording: _Recording):
        self.recording = recording

    @property
    def inner(self):
        return runtime.backend.storage

    def to_host(self, fld) -> np.ndarray:
        return self.inner.to_host(fld)

    def snapshot(self, fld):
        return self.inner.snapshot(fld)

    def restore(self, fld, snapshot) -> None:
        self.inner.restore(fld, snapshot)

    def fill(self, fld, value) -> None:
        self.recording.events.append(Fill(fld, _python_number(value)))
        self.inner.fill(fld, value)

    def set_element(self, fld, index, value) -> None:
        self.inner.set_element(fld, index, value)
        stored = self.inner.to_host(fld)[index]
        self.recording.events.append(SetElement(fld, tuple(index), tuple(
            _python_number(v) for v in np.ravel(stored))))

    def assign(self, fld, array) -> None:
        self.recording.python_access(fld, "load")

    def invalidate(self, fld) -> None:
        self.recording.refuse(f"changes {fld.name} from Python scope in a way a captured "
                              "program cannot replay", "do it before or after the captured call")


def _python_number(value):
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, np.generic):
        return value.item()
    return value
