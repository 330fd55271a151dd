"""Remember how numba typed each call, so a generated kernel's thousands of `a * b` are typed once.

numba types a call to a builtin (`operator.mul(float32, float32)`, `math.sin(float64)`, ...) by
trying the function's typing templates in order until one accepts the argument types, and it
does this afresh at every call site: nothing is remembered between sites or between kernels. A
generated adjoint has thousands of sites and a few dozen distinct (function, argument types)
pairs, so on a cold start most of numba's type inference was this search (mpm's 13 kernels:
10,230 of 11,185 lookups were repeats; the search took 2.1 of 8.1 s).

`install()` wraps `BaseFunction.get_call_type` (numba's builtin function types) with a memo
keyed by (function type, typing context, argument types). A miss runs numba's search unchanged;
a hit returns the same signature and repeats the search's one side effect, recording which
implementation the lowering will use for it (`_impl_keys`), so numba lowers exactly what it
would have. Calls with keyword arguments, unhashable argument types and failed lookups are not
remembered. Where numba's class lacks what this relies on (another version), nothing is
installed and compiling is as slow as before. TINYAD_NUMBA_MEMO=0 turns it off.
"""
from __future__ import annotations

import os
import threading

_installed = False
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0}


def install() -> bool:
    """Install the memo once per process (before numba compiles tinyad's kernels); -> whether
    it is in place."""
    global _installed
    with _lock:
        if _installed or os.environ.get("TINYAD_NUMBA_MEMO", "1") == "0":
            return _installed
        from numba.core.types import functions  # noqa: PLC0415  (numba loads on first compile)
        base = getattr(functions, "BaseFunction", None)
        search = getattr(base, "get_call_type", None)
        if search is None or not hasattr(base, "get_impl_key"):
            return False
        base.get_call_type = _remembering(search)
        _installed = True
        return True


def _remembering(search):
    memo: dict = {}

    def get_call_type(self, context, args, kws):
        if kws:
            return search(self, context, args, kws)
        key = (self, id(context), args)
        try:
            known = memo.get(key)
        except TypeError:                     # an argument type that cannot be hashed
            return search(self, context, args, kws)
        if known is not None:
            signature, impl_key = known
            self._impl_keys[signature.args] = impl_key     # as the search would set it
            stats["hits"] += 1
            return signature
        signature = search(self, context, args, kws)
        if signature is not None:
            memo[key] = (signature, self._impl_keys.get(signature.args))
            stats["misses"] += 1
        return signature

    get_call_type.__wrapped__ = search
    return get_call_type
