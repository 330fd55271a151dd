"""What `ti.<name>` says when tinyad has no such name: which Taichi feature tinyad leaves out,
or which public name the user probably meant (`ti.feild` -> `ti.field`)."""
from __future__ import annotations

import difflib
import types

from tinyad.core.errors import TinyadAttributeError
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

# Public attributes of `ti` that are implementation modules, not API: never suggested.
_API_MODULES = ("ad", "math")


def unknown_name(name: str, namespace: dict) -> TinyadAttributeError:
    """The error for `ti.<name>`, given the package's namespace."""
    if name in LEFT_OUT:
        return TinyadAttributeError(f"tinyad has no ti.{name}: {LEFT_OUT[name]}", user_loc(),
                                    hint=LEFT_OUT[name].split(": ", 1)[-1])
    public = [n for n, value in namespace.items() if not n.startswith("_") and
              (not isinstance(value, types.ModuleType) or n in _API_MODULES)]
    close = difflib.get_close_matches(name, public, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join('ti.' + c for c in close)}?" if close else ""
    return TinyadAttributeError(f"module 'tinyad' has no attribute '{name}'", user_loc(),
                                hint=hint)
