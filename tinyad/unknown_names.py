"""What `ti.<name>` says when tinyad has no such name: which Taichi feature tinyad leaves out,
or which public name the user probably meant (`ti.feild` -> `ti.field`)."""
from __future__ import annotations

import types

from tinyad.core.errors import TinyadAttributeError, missing_name

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

# Public attributes of `ti` that are implementation modules, not API: never suggested.
_API_MODULES = ("ad", "math")


def unknown_name(name: str, namespace: dict) -> TinyadAttributeError:
    """The error for `ti.<name>`, given the package's namespace."""
    public = [n for n, value in namespace.items() if not n.startswith("_") and
              (not isinstance(value, types.ModuleType) or n in _API_MODULES)]
    return missing_name("ti", name, public, LEFT_OUT, f"module 'tinyad' has no attribute '{name}'")
