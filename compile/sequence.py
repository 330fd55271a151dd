"""Fast mode runs a captured program (tinyad/sequence.py) as one compiled function where it can.

    runner = sequence_runner(program, backend)     # then runner() per call

On the CPU, when every kernel the program launches runs without threads (its loops are too short
to be worth them, as a small time step's are), the program becomes one compiled function: it
calls the kernels' compiled entries in order, by address, its fills and element writes are
stores, and each rolled loop is a loop, so one call from Python runs the whole time loop, forward
and backward (compile/nativecall.py says what it is made of, and why):

    def captured(block, ints, floats):
        for r in range(ints[0]):
            zero_at(block, 0, 2, np.float32)  # fill x.grad
            call_at(block, 5, "3:float32:0 0:float32:2")  # compute_U (primal)
            ...
            call_at(block, 10, "6:float32:2 0:float32:2 8:float32:0 float32", floats[2])  # advance (primal)
        return -1

Its numbers (loop counts, scalars, the values stored) are arguments, so a program alike but for
them (another step count, another dt) reuses the function, which is cached on disk like the
kernels (compile/cache.py). A kernel whose indices the IR cannot
bound reports a bad index through its flag (compile/badindex.py): the function returns at the
first launch that raised one, and the host raises the error there. Each launch of a kernel that
draws random numbers takes its seed from an array drawn before the call, in launch order, as the
launches themselves would draw them. Otherwise (a kernel with threads, or CUDA) the launches'
own compiled launchers run in a Python loop: no binding, no Tape, no per-launch bookkeeping.

A checked replay's program (tinyad/checkedreplay.py) also copies fields into `buffers` (Copy
events) and looks for NaN and infinity (CheckFinite events): where a look finds one, the run
stops there and raises ProgramStopped (tinyad/backend.py). So it does where one of the checks'
predicates (Stash, Compare, Nonzero: compile/replaypredicates.py) comes out otherwise than in
the watched call.
"""
from __future__ import annotations

import ctypes
from itertools import compress
from operator import is_not

import numba
import numpy as np
from numba.core import types

from tinyad.backend import ProgramStopped
from tinyad.compile import ahead, cache, replaypredicates
from tinyad.compile.badindex import bad_index_error
from tinyad.compile.cpu import CpuKernel
from tinyad.compile.nativecall import entry_address, entry_argument_types


def sequence_runner(program: list, backend, buffers=()):
    """The program's runner on `backend` (fast mode's): `run()` runs it once and says True, or
    says False while its compiled function is not ready yet (the caller then runs the function
    as plain Python); `wait()` waits until it is. `buffers`: the arrays its Copy events copy
    into, by slot (read at each run: the caller may swap them)."""
    events = [e for item in program for e in (item.body if _is_loop(item) else (item,))]
    kernels = [e.traced.program(e.variant, backend) for e in events if e.kind == "launch"]
    if backend.target == "cpu" and all(_callable_from_numba(k) for k in kernels):
        return _CompiledSequence(program, backend, buffers)
    return _LaunchersInPython(program, backend, buffers)


def _is_loop(item) -> bool:
    """A Loop of tinyad/sequence.py (events and loops are told apart by their fields: this
    layer does not import the API's types)."""
    return hasattr(item, "body")


def _callable_from_numba(kernel) -> bool:
    """Is the kernel one numba function the program can call by address, with the argument
    types the program passes (compile/nativecall.py: a mismatch would not be caught there)?"""
    if not isinstance(kernel, CpuKernel) or kernel.generated.parallel:
        return False
    gen = kernel.generated
    passed = [types.Array(numba.from_dtype(f.host_array.dtype), f.host_array.ndim, "C")
              for f in gen.fields]
    passed += [numba.from_dtype(np.dtype(d.np)) for d in gen.scalars]
    passed += [types.int64] if gen.uses_random else []
    passed += [types.Array(types.int64, 1, "C")] if gen.bad_slots else []
    try:
        return entry_argument_types(kernel.fn) == tuple(passed)
    except (AttributeError, ValueError):     # (not one numba function of one signature)
        return False


class _LaunchersInPython:
    """The program's launches through the kernels' own compiled launchers, from Python."""

    def __init__(self, program, backend, buffers=()):
        self.program, self.backend, self.buffers = program, backend, buffers
        self.storage, self.rng = backend.storage, backend.rng

    def _event(self, event):
        kind = event.kind
        if kind == "launch":
            event.traced.program(event.variant, self.backend).run(event.scalars, self.rng)
        elif kind == "set":
            self.storage.set_element(event.field, event.index, _element(event))
        elif kind == "fill":
            self.storage.fill(event.field, event.value)
        elif kind == "copy":
            part = tuple(slice(lo, hi) for lo, hi in event.box)
            self.buffers[event.slot][part] = self.storage.to_host(event.field)[part]
        elif kind in replaypredicates.KINDS:
            replaypredicates.run(event, self.storage, self.buffers)
        elif not _finite(self.storage.to_host(event.field), event.scalars):
            raise ProgramStopped(f"{event.field.name} holds a NaN or an infinity")

    def run(self) -> bool:
        for item in self.program:
            if _is_loop(item):
                for r in range(item.count):
                    for event in item.step(r):
                        self._event(event)
            else:
                self._event(item)
        return True

    def wait(self) -> None:
        """(Nothing to wait for: the launchers are compiled already.)"""


def _finite(array, rows) -> bool:
    """Are the rows (lo, hi) of `array` (none: all) finite? A sum first (no temporary array)."""
    part = array[rows[0]:rows[1]] if rows else array
    with np.errstate(all="ignore"):
        return bool(np.isfinite(part.sum())) or bool(np.isfinite(part).all())


def _element(event):
    """The stored components of a SetElement, in the field's element shape."""
    shape = event.field.element_shape
    return np.array(event.value).reshape(shape) if shape else event.value[0]


class _CompiledSequence:
    """The numba function for a program, and the host's side of a call to it. It compiles in
    compile/ahead.py's helper process, while the captured function goes on running as plain
    Python (so capturing adds nothing to a program's first calls); TINYAD_COMPILE_AHEAD=0, or
    one core, compiles it here, now."""

    def __init__(self, program, backend, buffers=()):
        self.backend, self.rng = backend, backend.rng
        self.buffers = buffers       # the arrays Copy events copy into, by slot
        self.row_copies = 0          # (names of the loops that copy whole rows)
        # What the block of words (compile/nativecall.py) holds, in order: arrays (their data
        # address and shape: a field's, a kernel's bad flag, a buffer, the seeds) and kernels'
        # entries (their address)
        self.words: list = []        # (what gets an array, its first word)
        self.addresses: list = []    # (a kernel's entry, its word)
        self.size = 0                # words so far
        self.field_words: dict = {}  # id(field) -> its first word
        self.fields: dict = {}       # id(field) -> its array's name, where the function has one
        self.kernels: dict = {}      # id(CpuKernel) -> (kernel, its address's word, bad flag,
        #                                                its first word)
        self.failures: list = []     # return code -> the kernel whose bad flag it was
        self.random_launches = 0
        self.uses_helpers = False    # (the replay compares, compile/replaypredicates.py)
        # The program's numbers (loop counts, scalars, stored values) are arguments, so that
        # programs alike but for them (another step count, another dt) share one function
        self.numbers = {"ints": [], "floats": []}
        self.arrays: list = []       # lines making the arrays from the block
        lines = []
        for item in program:
            if _is_loop(item):
                lines.append(f"    for r in range({self._number(item.count, True)}):")
                lines += [self._event(e, d, 2) for e, d in zip(item.body, item.deltas)]
                self.random_launches += (item.count - 1) * self._random_in(item.body)
            else:
                lines.append(self._event(item, (), 1))
        if self.random_launches:
            self.seeds = np.zeros(self.random_launches, np.int64)
            self.arrays.append(self._array_line("seeds", self.seeds, lambda: self.seeds))
        lines = ["def captured(block, ints, floats):", *self.arrays, "    s = 0", *lines,
                 "    return -1"]
        self.ints = np.array(self.numbers["ints"] or [0], np.int64)
        self.floats = np.array(self.numbers["floats"] or [0.0], np.float64)
        self.numbers_at = (self.ints.ctypes.data, self.floats.ctypes.data)
        self.source = _module_source("\n".join(lines), self.uses_helpers)
        self.stem = f"captured_{cache.key('sequence', self.source)}"
        self.fn = self.call = None
        self.held: list = []         # what the block points into, as it was last built
        self.block = None
        if ahead.enabled():
            ahead.submit([(self.stem, self.source)], background=True)
        else:
            self.wait()

    def wait(self) -> None:
        """Until the function is compiled (taking its job back from the helper if it has not
        begun it)."""
        if self.fn is None:
            ahead.need(self.stem)
            self.fn = cache.load(self.stem, self.source).captured
            self.call = ctypes.PYFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                          ctypes.c_void_p)(self.fn.address)

    def _random_in(self, events) -> int:
        return sum(1 for e in events if e.kind == "launch" and
                   e.traced.program(e.variant, self.backend).generated.uses_random)

    def _words_for(self, array, get) -> int:
        """Words in the block for an array (its data address, then its shape); the first.
        `get()` gives the array at each run (a field's may be another after a swap)."""
        first = self.size
        self.words.append((get, first))
        self.size += 1 + array.ndim
        return first

    def _array_line(self, name: str, array, get) -> str:
        """The line making an array of the function from its words in the block."""
        return (f"    {name} = array_at(block, {self._words_for(array, get)}, {array.ndim}, "
                f"np.{array.dtype.type.__name__})")

    def _field_words(self, fld) -> int:
        """A field's first word in the block (a launch, fill or store reads its array there,
        with no array made in the function: numba would type and lower each)."""
        if id(fld) not in self.field_words:
            self.field_words[id(fld)] = self._words_for(fld.host_array, lambda: fld.host_array)
        return self.field_words[id(fld)]

    def _array(self, fld) -> str:
        """A field as an array of the function (for copies, looks and compares)."""
        if id(fld) not in self.fields:
            name = f"a{len(self.fields)}"
            self.fields[id(fld)] = name
            array = fld.host_array
            self.arrays.append(f"    {name} = array_at(block, {self._field_words(fld)}, "
                               f"{array.ndim}, np.{array.dtype.type.__name__})")
        return self.fields[id(fld)]

    def _buffer(self, slot: int) -> str:
        name = f"c{slot}"
        if not any(line.startswith(f"    {name} = ") for line in self.arrays):
            self.arrays.append(self._array_line(name, self.buffers[slot],
                                                lambda: self.buffers[slot]))
        return name

    def _kernel(self, kernel) -> tuple:
        """(its address's word, its bad flag's first word or None)"""
        if id(kernel) not in self.kernels:
            gen = kernel.generated
            bad = np.zeros(gen.bad_slots, np.int64) if gen.bad_slots else None
            bad_words = None if bad is None else self._words_for(bad, lambda: bad)
            self.addresses.append((entry_address(kernel.fn), self.size))
            self.kernels[id(kernel)] = (kernel, self.size, bad, bad_words)
            self.size += 1
        _, word, _, bad_words = self.kernels[id(kernel)]
        return word, bad_words

    def _event(self, event, delta, depth) -> str:
        pad = "    " * depth
        if event.kind == "copy":
            return self._copy(event, delta, pad)
        if event.kind in replaypredicates.KINDS:
            self.uses_helpers = self.uses_helpers or event.kind == "compare"
            return replaypredicates.source(self, event, delta, pad)
        if event.kind == "finite":
            # (a sum is NaN or infinite where an element is, or where finite ones overflow:
            # then the call runs plainly, which looks again)
            array = self._array(event.field)
            if event.scalars:
                lo, hi = (self._bound(s, d) for s, d in
                          zip(event.scalars, delta or (0,) * len(event.scalars)))
                array = f"{array}[{lo}:{hi}]"
            return (f"{pad}if not np.isfinite({array}.sum()):  # "
                    f"{event.field.name}\n{pad}    return {NONFINITE}")
        if event.kind != "launch":
            return pad + self._store(event)
        kernel = event.traced.program(event.variant, self.backend)
        gen = kernel.generated
        word, bad = self._kernel(kernel)
        layout = [_layout_word(self._field_words(f), f.host_array) for f in gen.fields]
        scalars = [self._scalar(d, s, ds) for d, s, ds in
                   zip(gen.scalars, event.scalars, delta or (0,) * len(event.scalars))]
        layout += [d.np.__name__ for d in gen.scalars]
        scalars += ["seeds[s]"] if gen.uses_random else []
        layout += ["int64"] if gen.uses_random else []
        layout += [_layout_word(bad, self.kernels[id(kernel)][2])] if bad is not None else []
        text = (f'{pad}call_at(block, {word}, "{" ".join(layout)}"'
                f'{"".join(", " + s for s in scalars)})  # {event.traced.ir.name} ({event.variant})')
        if gen.uses_random:
            text += f"\n{pad}s += 1"
            self.random_launches += 1
        if bad is not None:
            self.failures.append(kernel)
            text += (f"\n{pad}if first_int_at(block, {bad}) != 0:"
                     f"\n{pad}    return {len(self.failures) - 1}")
        return text

    def _copy(self, event, delta, pad) -> str:
        """A Copy: all of a field, a box of it, or whole rows (a flat loop: a memcpy's speed)."""
        array, buffer = self._array(event.field), self._buffer(event.slot)
        if not event.scalars:
            return (f"{pad}{buffer}.reshape({buffer}.size)[:] = "
                    f"{array}.reshape({array}.size)  # copy {event.field.name}")
        bounds = [self._bound(s, ds) for s, ds in
                  zip(event.scalars, delta or (0,) * len(event.scalars))]
        if len(bounds) > 2:
            part = ", ".join(f"{lo}:{hi}" for lo, hi in zip(bounds[::2], bounds[1::2]))
            return f"{pad}{buffer}[{part}] = {array}[{part}]  # copy {event.field.name}"
        self.row_copies += 1
        n = self.row_copies
        return "\n".join(pad + line for line in (
            f"w{n} = {array}.size // {array}.shape[0]",
            f"f{n}, g{n} = {array}.reshape({array}.size), {buffer}.reshape({buffer}.size)",
            (f"for i{n} in range(({bounds[0]}) * w{n}, ({bounds[1]}) * w{n}):  # copy "
             f"{event.field.name}"),
            f"    g{n}[i{n}] = f{n}[i{n}]"))

    def _bound(self, value, delta) -> str:
        text = self._number(value, True)
        return text + (f" + r * {self._number(delta, True)}" if delta else "")

    def _number(self, value, is_int: bool) -> str:
        """`value` as an element of the function's `ints` or `floats` argument."""
        kind = "ints" if is_int else "floats"
        self.numbers[kind].append(value)
        return f"{kind}[{len(self.numbers[kind]) - 1}]"

    def _scalar(self, dtype, value, delta) -> str:
        """A scalar argument, as an int64 or a float64 (call_at converts it to its type)."""
        text = self._number(value, dtype.is_int)
        if delta:
            text += f" + r * {self._number(delta, dtype.is_int)}"
        return text

    def _store(self, event) -> str:
        """A fill or an element write (compile/nativecall.py: a loop or a store, no numba
        function typed for them)."""
        words, dtype = self._field_words(event.field), event.field.dtype
        host = event.field.host_array
        np_type = f"np.{host.dtype.type.__name__}"
        if event.kind == "fill" and _all_zero_bits(event.value):
            return f"zero_at(block, {words}, {host.ndim}, {np_type})  # fill {event.field.name}"
        if event.kind == "fill":
            value = self._number(event.value, dtype.is_int)
            return (f"fill_at(block, {words}, {host.ndim}, {np_type}, {value})  "
                    f"# fill {event.field.name}")
        first = int(np.ravel_multi_index(event.index + (0,) * len(event.field.element_shape),
                                         host.shape))
        stores = [f"store_at(block, {words}, {np_type}, {self._number(first + k, True)}, "
                  f"{self._number(v, dtype.is_int)})" for k, v in enumerate(event.value)]
        return "; ".join(stores) + f"  # set an element of {event.field.name}"

    def _block(self) -> int:
        """The address of the block of words for this run: rebuilt where an array is not the
        one it was (a field's after a swap, a buffer the caller replaced)."""
        now = [get() for get, _ in self.words]
        if self.block is None:
            block = np.zeros(max(self.size, 1), np.int64)
            for array, (_, first) in zip(now, self.words):
                _put_array(block, first, array)
            for address, word in self.addresses:
                block[word] = address
            self.block, self.held = (block, block.ctypes.data), now
        elif any(map(is_not, now, self.held)):
            # (only the words of those: a checked replay swaps a buffer at every call)
            for array, (_, first) in compress(zip(now, self.words), map(is_not, now, self.held)):
                _put_array(self.block[0], first, array)
            self.held = now
        return self.block[1]

    def run(self) -> bool:
        if self.fn is None:
            if not cache.is_ready(self.stem):
                return False
            self.wait()
        if self.random_launches:
            self.seeds[:] = self.rng.integers(0, 2**63 - 1, size=self.random_launches,
                                              dtype=np.int64)
        code = self.call(self._block(), *self.numbers_at)
        if code == NONFINITE:
            raise ProgramStopped("a look for NaN and infinity found one")
        if code == replaypredicates.STOPPED:
            raise ProgramStopped("a check came out otherwise than in the watched call")
        if code >= 0:
            kernel = self.failures[code]
            bad = self.kernels[id(kernel)][2]
            raise bad_index_error(kernel.generated.sites, bad)
        return True


def _put_array(block, first: int, array) -> None:
    """An array's words in the block: its data's address, then its shape."""
    if not array.flags.c_contiguous:
        raise ValueError("a captured program's array is not C-contiguous")
    block[first:first + 1 + array.ndim] = (array.__array_interface__["data"][0], *array.shape)


def _all_zero_bits(value) -> bool:
    """Is a fill's value 0 (not -0.0, whose sign bit a memset would lose)?"""
    return value == 0 and not np.signbit(value)


def _layout_word(first: int, array) -> str:
    """An array argument of call_at's layout (compile/nativecall.py block_arguments)."""
    return f"{first}:{array.dtype.name}:{array.ndim}"


SIGNATURE = "types.int64(types.CPointer(types.int64), types.CPointer(types.int64), " \
            "types.CPointer(types.float64))"


def _module_source(body: str, uses_helpers: bool) -> str:
    """The program's module: a C callback of (block, ints, floats), compiled when imported (in
    the helper process too), cached on disk like the kernels."""
    helpers = (f"helpers = load_published({_published_helpers()!r})\n"
               "same, close = helpers.same, helpers.close\n") if uses_helpers else ""
    return ('"""A captured program (compile/sequence.py): generated code, do not edit."""\n'
            "import numpy as np\nfrom numba import cfunc, types\n\n"
            "from tinyad.compile.cache import load_published\n"
            "from tinyad.compile.nativecall import array_at, call_at, fill_at, first_int_at, "
            "store_at, zero_at\n\n"
            f"{helpers}\n\n"
            f"@cfunc({SIGNATURE}, error_model=\"numpy\", cache=True)\n{body}\n")


NONFINITE = -2      # what the compiled program returns where a look found a NaN or infinity

# The replay compares, one module in the cache that every checked program imports: numba
# compiles each array type's body once, not once more in every new program
HELPERS = '''"""The replay compares of captured programs (compile/replaypredicates.py)."""
import numpy as np
from numba import njit
'''


def _published_helpers() -> str:
    """The helper module's stem, written to the cache where it is not yet."""
    source = HELPERS + replaypredicates.HELPERS
    stem = f"captured_helpers_{cache.key('sequence helpers', source)}"
    cache.publish(stem, source)
    return stem
