"""What `ti.<name>` says when tinyad has no such name: which Taichi feature tinyad leaves out,
or which public name the user probably meant (`ti.feild` -> `ti.field`)."""
from __future__ import annotations

import types

from tinyad.core.errors import TinyadAttributeError, missing_name
from tinyad.core.srcloc import user_loc

# Taichi features tinyad leaves out, and what to do instead.
LEFT_OUT = {
    "GUI": "Taichi's window; tinyad draws nothing: plot x.to_numpy() with matplotlib",
    "ui": "Taichi's GGUI window; tinyad draws nothing: plot x.to_numpy() with matplotlib",
    "linalg": "sparse matrices and their solvers (ti.linalg) are not in tinyad: build and "
              "solve the system with scipy from x.to_numpy()",
    "SparseMatrixBuilder": "sparse matrices are not in tinyad",
    "sparse_matrix_builder": "sparse matrices are not in tinyad",
    "Mesh": "Taichi's meshes are not in tinyad",
    "Texture": "textures are not in tinyad",
    "graph": "compute graphs are not in tinyad: call the kernels from Python",
    "aot": "ahead-of-time modules are not in tinyad",
    "profiler": "Taichi's kernel profiler is not in tinyad: time with time.perf_counter()",
}
_SPARSE = ("sparse and dynamic SNodes are stored densely in tinyad, with no list or activity "
           "operations: keep a count in an integer field (k = ti.atomic_add(count[i], 1))")
LEFT_OUT.update({name: _SPARSE for name in ("append", "length", "activate", "deactivate",
                                              "is_active", "deactivate_all_snodes")})

# Public attributes of `ti` that are implementation modules, not API: never suggested.
_API_MODULES = ("ad", "math")


def unknown_name(name: str, namespace: dict) -> TinyadAttributeError:
    """The error for `ti.<name>`, given the package's namespace."""
    public = [n for n, value in namespace.items() if not n.startswith("_") and
              (not isinstance(value, types.ModuleType) or n in _API_MODULES)]
    return missing_name("ti", name, public, LEFT_OUT, f"module 'tinyad' has no attribute '{name}'")


class LeftOutName:
    """`ti.ui.Window` and the like: a name in a Taichi module tinyad leaves out. Naming it is
    allowed, as library code does (TinyDiffRast's `def track_inputs(self, window: ti.ui.Window)`
    runs at import, in a package a headless program uses without a window); calling it is the
    left-out error at the user's line."""

    def __init__(self, path: str, why: str):
        self._path, self._why = path, why

    def __getattr__(self, attr: str) -> LeftOutName:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return LeftOutName(f"{self._path}.{attr}", self._why)

    def __call__(self, *args, **kwargs):
        raise TinyadAttributeError(f"tinyad has no {self._path}: {self._why}", user_loc(),
                                   hint=self._why.split(": ", 1)[-1])

    def __repr__(self) -> str:
        return f"<{self._path}: not in tinyad>"


# Left-out modules whose names a program may mention without using them.
NAMEABLE = ("ui",)
