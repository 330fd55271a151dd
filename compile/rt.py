"""Small run-time helpers that generated kernels call, written once as plain Python.

The generated module pastes their source in (compile/pysource.py), where numba compiles them with
`njit` on the CPU and `cuda.jit(device=True)` for CUDA. They must stay inside the subset both
targets accept.

Random numbers. `ti.random()` in fast mode is a counter-based generator (splitmix64): each launch
draws one 64-bit seed from tinyad's seeded numpy generator (`ti.init(random_seed=...)`), each
iteration of a parallel loop starts its own stream from (seed, iteration index), and every draw
advances that stream. The numbers are reproducible for a given seed and do not depend on the
number of threads or on the schedule, and interp mode draws the same ones
(interp/random_stream.py). Stream (seed + k, i) is iteration i of the kernel's k-th parallel loop,
whether numba runs that loop in parallel or not.
"""
from __future__ import annotations

import inspect

import numpy as np
from numba import float32, float64, int32, int64, uint64

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S11, _S27, _S30, _S31, _S32, _S40 = (np.uint64(s) for s in (11, 27, 30, 31, 32, 40))
_F24 = np.float32(2.0 ** -24)
_F53 = np.float64(2.0 ** -53)
_I31 = np.int64(2 ** 31)
_MASK63 = np.int64(2 ** 63 - 1)


def mix(z):
    """splitmix64's finaliser: a bijection of uint64 that scrambles every bit."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def rng_init(seed, index):
    """The state of stream `index` (an iteration of a parallel loop; -1 outside loops)."""
    return mix(uint64(seed & _MASK63) ^ (uint64(index & _MASK63) * _GOLDEN))


def rng_next(state):
    return state + _GOLDEN


def rng_f32(state):
    """A float32 in [0, 1) with 24 random bits."""
    return float32(mix(state) >> _S40) * _F24


def rng_f64(state):
    """A float64 in [0, 1) with 53 random bits."""
    return float64(mix(state) >> _S11) * _F53


def rng_int(state):
    """An integer in [-2**31, 2**31), like interp mode's random integers."""
    return int64(mix(state) >> _S32) - _I31


def rng_i32(state):
    return int32(rng_int(state))


def select(cond, a, b):
    """`a if cond else b` as a call: a kernel with thousands of selects then stays one basic
    block for numba (whose SSA pass recurses once per block), and LLVM inlines it."""
    return a if cond else b


def push(stack, top, value):
    """stack[top] = value, in a stack array that doubles when full; -> the (new) array.
    A call, so that a kernel saving thousands of locals stays one basic block for numba. The
    copy is a loop: numba compiles a slice assignment in ~2 s, once per process."""
    if top == stack.shape[0]:
        bigger = np.empty(2 * stack.shape[0], stack.dtype)
        for k in range(top):
            bigger[k] = stack[k]
        stack = bigger
    stack[top] = value
    return stack


def check_index(site, shape, index):
    """Debug mode: `index` (a tuple of int64) if inside `shape`, else IndexError(site, index).
    The launcher turns that into a TinyadIndexError naming the field and the user's line."""
    for k in range(len(index)):
        if index[k] < 0 or index[k] >= shape[k]:
            raise IndexError(site, index)
    return index


def check_divisor(site, value):
    """Debug mode: `value` if it is not zero, else ZeroDivisionError(site), which the launcher
    turns into a TinyadRuntimeError naming the user's line."""
    if value == 0:
        raise ZeroDivisionError(site)
    return value


def check_exponent(site, value):
    """Debug mode: an integer exponent `value` if it is not negative, else
    ArithmeticError(site), which the launcher turns into a TinyadRuntimeError at the user's
    line."""
    if value < 0:
        raise ArithmeticError(site)
    return value


def check_assert(site, held, values):
    """Debug mode: an assert whose condition `held` is false raises AssertionError(site,
    values), which the launcher words as interp mode does (its message, the user's line)."""
    if not held:
        raise AssertionError(site, values)
    return 0


CONSTANTS = ("_GOLDEN", "_M1", "_M2", "_S11", "_S27", "_S30", "_S31", "_S32", "_S40", "_F24",
             "_F53", "_I31", "_MASK63")
RANDOM = ("mix", "rng_init", "rng_next", "rng_f32", "rng_f64", "rng_int", "rng_i32")
HELPERS = RANDOM + ("select", "push", "check_index", "check_divisor", "check_exponent",
                    "check_assert")


def helper_source(names, decorator: str) -> str:
    """The source of the helpers `names` (and those they call), each under `decorator`, for a
    generated module: the helpers are compiled along with the kernels that call them."""
    wanted = set(names)
    if wanted & set(RANDOM):
        wanted |= {"mix", "rng_int"}
    chunks = [f"{decorator}\n{_SOURCES[name]}\n" for name in HELPERS if name in wanted]
    return "\n\n".join(chunks)


# read once, at import: the generated modules must not depend on the file changing later
_SOURCES = {name: inspect.getsource(globals()[name]).rstrip() for name in HELPERS}
