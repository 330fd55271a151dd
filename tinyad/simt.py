"""Taichi's ti.simt: GPU warp, block and subgroup intrinsics (shuffles, votes, barriers, shared
memory). tinyad runs each loop iteration on its own, with no warps or blocks to coordinate.
Programs may still name them (Taichi programs pick a CUDA path at import time, beside a CPU
one): naming one is allowed, calling one is a clear error at the user's line."""
from __future__ import annotations

from tinyad.core import builder as B
from tinyad.core.errors import TinyadSyntaxError
from tinyad.core.srcloc import UNKNOWN, user_loc


class _Intrinsic:
    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args, **kwargs):
        loc = B.current_loc()      # (a kernel's line while one is traced)
        raise TinyadSyntaxError(
            f"{self.name}() is a GPU warp or block intrinsic: tinyad has no warps, blocks or "
            "shared memory", loc if loc is not UNKNOWN else user_loc(),
            hint="write it as a plain loop over the field (a prefix sum: "
                 "ti.algorithms.PrefixSumExecutor)")

    def __repr__(self) -> str:
        return f"<{self.name}: not in tinyad>"


class _Namespace:
    """ti.simt.warp, .block, .subgroup or .grid: every name in it is an _Intrinsic."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> _Intrinsic:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Intrinsic(f"ti.simt.{self._name}.{attr}")


warp, block, subgroup, grid = (_Namespace(n) for n in ("warp", "block", "subgroup", "grid"))
