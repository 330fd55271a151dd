"""`ti.random()` in interp mode: the same counter-based streams as fast mode (compile/rt.py).

Each launch draws one 64-bit seed from ti.init's generator. The kernel's top level draws from
stream (seed, -1); iteration i of its k-th parallel loop (k = 1, 2, ... in source order) from
stream (seed + k, i); every draw advances the stream, then reads it through splitmix64's
finaliser. So a program gives the same numbers in both modes, for any schedule or thread count.
Plain Python integers, masked to 64 bits, compute exactly what fast mode's uint64s do.
"""
from __future__ import annotations

import numpy as np

MASK64 = 2**64 - 1
MASK63 = 2**63 - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def launch_seed(rng: np.random.Generator) -> int:
    """A launch's seed, drawn as fast mode draws it (compile/cpu.py's _seed)."""
    return int(rng.integers(0, 2**63 - 1))


def stream(seed: int, index: int) -> int:
    """The state of stream `index` (a parallel loop's iteration; -1 at the top level)."""
    return mix((seed & MASK63) ^ (((index & MASK63) * GOLDEN) & MASK64))


def advance(state: int) -> int:
    return (state + GOLDEN) & MASK64


def value(state: int, dtype_name: str):
    """The number a draw from `state` gives, for a ti.random(dtype)."""
    bits = mix(state)
    if dtype_name == "f32":
        return np.float32(bits >> 40) * np.float32(2.0 ** -24)
    if dtype_name == "f64":
        return np.float64(bits >> 11) * np.float64(2.0 ** -53)
    return np.int64((bits >> 32) - 2**31)     # then cast to the dtype, wrapping as numba does
