"""The disk cache of generated kernels.

Each generated module is written once to `<cache dir>/<kernel>_<hash>.py` and imported from
there, so numba's own `cache=True` can keep the machine code next to it (in `__pycache__/`).
A later process that generates the same source finds both and skips numba's compile.

The hash covers everything the code depends on: the kernel's printed IR, its fields' dtypes and
array ranks, the target, the debug flag, the generated source itself, the helper modules'
source (compile/atomics.py, compile/rt.py: numba does not notice when they change) and the numba,
llvmlite, numpy and tinyad versions. numba adds the CPU model to its own key.

Safety: a module is published with write-to-temp + os.replace, so concurrent processes never
see half a file; a file whose text is not what we generated (truncated, edited, corrupt) is
rewritten; if importing or loading machine code from an entry fails, the entry is deleted and
compiled afresh, once. `TINYAD_CACHE_DIR` moves the cache (default ~/.cache/tinyad); if that
directory cannot be written, a temporary one is used for this process.
"""
from __future__ import annotations

import glob
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import tempfile
import threading
import warnings

from tinyad.compile import atomics, rt, typingmemo

_lock = threading.RLock()     # (re-entered: a module loading the modules it calls)
_fallback_dir: str | None = None


def cache_dir() -> str:
    """Where generated modules live (created on demand)."""
    global _fallback_dir
    path = os.environ.get("TINYAD_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tinyad")
    try:
        os.makedirs(path, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    if _fallback_dir is None:
        _fallback_dir = tempfile.mkdtemp(prefix="tinyad-cache-")
        warnings.warn(f"tinyad: cache directory {path} is not writable: compiled kernels go to "
                      f"{_fallback_dir}", RuntimeWarning, stacklevel=2)
    return _fallback_dir


def _versions() -> str:
    import llvmlite  # noqa: PLC0415
    import numba  # noqa: PLC0415
    import numpy  # noqa: PLC0415
    parts = [f"numba={numba.__version__}", f"llvmlite={llvmlite.__version__}",
             f"numpy={numpy.__version__}", f"tinyad={_tinyad_version()}",
             f"python={sys.version_info[:2]}"]
    for module in (atomics, rt):
        with open(module.__file__, "rb") as f:
            parts.append(hashlib.sha256(f.read()).hexdigest()[:16])
    return "|".join(parts)


def _tinyad_version() -> str:
    try:
        return importlib.metadata.version("tinyad")
    except importlib.metadata.PackageNotFoundError:    # run from a source tree, not installed
        return "source"


_VERSIONS: str | None = None


def key(*parts: str) -> str:
    """A hash of the parts and of the versions the compiled code depends on."""
    global _VERSIONS
    if _VERSIONS is None:
        _VERSIONS = _versions()
    digest = hashlib.sha256(_VERSIONS.encode())
    for part in parts:
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()[:24]


def _publish(path: str, source: str) -> None:
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(source)
    os.replace(tmp, path)


def _is_current(path: str, source: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read() == source
    except (OSError, UnicodeDecodeError):
        return False


def _forget(directory: str, stem: str) -> None:
    """Delete an entry: its source and numba's index and machine code for it."""
    for path in [os.path.join(directory, stem + ".py")] + glob.glob(
            os.path.join(directory, "__pycache__", stem + ".*")):
        try:
            os.remove(path)
        except OSError:
            pass


_modules: dict[tuple, object] = {}       # (directory, stem) -> module, this process
stats = {"imported": 0, "rebuilt": 0}


def publish(stem: str, source: str) -> None:
    """Write `<stem>.py` for another process to compile (compile/ahead.py)."""
    path = os.path.join(cache_dir(), stem + ".py")
    if not _is_current(path, source):
        _publish(path, source)


def is_ready(stem: str) -> bool:
    """Loaded in this process, or compiled before (a marker written once it imported: globbing
    for numba's index lists the whole cache, 0.1 s per kernel at 30000 entries)."""
    directory = cache_dir()
    return (directory, stem) in _modules or os.path.exists(_ready_marker(directory, stem))


def _ready_marker(directory: str, stem: str) -> str:
    return os.path.join(directory, "__pycache__", stem + ".ready")


def load(stem: str, source: str):
    """The module for `source`, written to the cache as `<stem>.py` if needed, imported once per
    process. Importing it compiles (or loads from numba's cache) its kernels."""
    with _lock:
        directory = cache_dir()
        if (directory, stem) in _modules:
            return _modules[directory, stem]
        path = os.path.join(directory, stem + ".py")
        try:
            module = _import(stem, path, source)
        except Exception:          # a damaged entry: rebuild it from scratch, once
            _forget(directory, stem)
            stats["rebuilt"] += 1
            module = _import(stem, path, source)
        _modules[directory, stem] = module
        return module


def load_published(stem: str):
    """The module `<stem>.py` of the cache, as `load` gives it (a generated module that calls
    kernels of other modules, compile/sequence.py's, imports them by this)."""
    module = _modules.get((cache_dir(), stem))
    if module is not None:
        return module
    with open(os.path.join(cache_dir(), stem + ".py"), encoding="utf-8") as f:
        return load(stem, f.read())


def _import(stem: str, path: str, source: str):
    if not _is_current(path, source):
        _publish(path, source)
    typingmemo.install()      # before numba types the module's kernels
    # numba's cache records the module name and imports it when loading: keep it stable
    name = f"tinyad_k_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # numba's SSA pass recurses along chains of basic blocks: big kernels need a deeper
    # Python stack than the default 1000 frames (pure-Python frames: cheap since 3.11)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 200_000))
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        sys.setrecursionlimit(limit)
    stats["imported"] += 1
    marker = _ready_marker(os.path.dirname(path), stem)
    if not os.path.exists(marker):
        try:
            os.makedirs(os.path.dirname(marker), exist_ok=True)
            with open(marker, "w"):
                pass
        except OSError:         # (a read-only cache: the helper is asked again next time)
            pass
    return module
