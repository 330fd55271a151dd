"""The layers of tinyad, and a test that keeps imports pointing down them.

Every module of tinyad belongs to one layer; a layer may import only the layers listed for it.
Imports inside functions count too: hiding an upward import in a function is still a cycle; so
does a module named by a string (`importlib.import_module("tinyad.interp.backend")`, a
registry's entry), and a dynamic import whose name is not a string in sight must be listed
here. Inside a layer, modules may not import each other in a circle; inside the API, each
module stands on a floor and imports only its own floor and those below. No library file grows
past 600 lines. The exceptions are listed below with their reasons, and the lists may only
shrink. Each check is shown to fail on a made-up bad import graph (the tests at the end).

    core      tinyad/core/       the IR: types, source locations, errors, nodes, op table,
                                 builder, printer, well-formedness; it raises, never prints
    analysis  tinyad/analysis/   IR queries the transforms, code generators and checker share
    notices   tinyad/notices.py  notices on stderr, for every layer above the core
    check     tinyad/check/      the rule checker every backend runs: the rule catalogue (every
                                 rule's error, report and rendering), the launch checks, the
                                 replay witness, the recording variants, their proofs from the IR
    autodiff  tinyad/autodiff/   IR -> IR transforms (reverse and forward mode)
    frontend  tinyad/frontend/   Python source -> IR, and the kernel language (lang, math, matrix)
    backend   tinyad/backend.py  the protocol a backend implements, and the registry of backends
    interp    interp/            the interpreter backend and the sympy domain
    compile   compile/           the numba backend (CPU and CUDA)
    api       tinyad/*.py        what users call: fields, kernels, Tape, verification, runtime
                                 (on the floors of API_FLOORS)
    tools     cli, lessons       commands on top of the API

Where to add things: an op is a row in core/ops.py (plus its backend spellings); a rule is a
constructor in check/rules.py; a transform is a module in autodiff/; a backend is a package that
implements tinyad/backend.py and is named in its registry, `BACKENDS`.
"""
import ast
import functools
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = {"tinyad": ROOT / "tinyad", "tinyad.interp": ROOT / "interp",
            "tinyad.compile": ROOT / "compile"}

ALLOWED = {
    "core": {"core"},
    "analysis": {"core", "analysis"},
    "notices": {"core", "notices"},
    "check": {"core", "analysis", "notices", "check"},
    "autodiff": {"core", "analysis", "notices", "check", "autodiff"},
    "frontend": {"core", "notices", "frontend"},
    "backend": {"core", "notices", "backend"},
    "interp": {"core", "analysis", "notices", "check", "backend", "interp"},
    "compile": {"core", "analysis", "notices", "check", "backend", "compile"},
    "api": {"core", "analysis", "notices", "check", "autodiff", "frontend", "backend", "interp",
            "compile", "api"},
    "tools": {"core", "analysis", "notices", "check", "autodiff", "frontend", "backend", "interp",
              "compile", "api", "tools"},
}

# Imports that break the layering, each with why it stays. A new entry needs a reason a reviewer
# accepts.
DEBT: dict[tuple[str, str], str] = {
    ("tinyad.backend", "tinyad.interp.backend"):
        "the registry: ti.init(mode=...) picks a backend by name, imported only when asked",
    ("tinyad.backend", "tinyad.compile.backend"):
        "the registry: ti.init(mode=...) picks a backend by name, imported only when asked",
}

# The API's floors, lowest first (review 2026-11-28, 7.2 step 4): a module imports modules of
# its own floor and those below. Every API module stands on one.
API_FLOORS = [
    ("helpers", {"tinyad.absent", "tinyad.algorithms", "tinyad.allocation", "tinyad.arrayparams",
                 "tinyad.colors", "tinyad.excepthook", "tinyad.funcs", "tinyad.gradreport",
                 "tinyad.sequence", "tinyad.simt", "tinyad.unknown_names", "tinyad.varnames"}),
    ("runtime", {"tinyad.runtime", "tinyad.undo", "tinyad.taichi_internals", "tinyad.twins"}),
    ("field", {"tinyad.field", "tinyad.tapeops", "tinyad.ndarray", "tinyad.structfield"}),
    ("kernel", {"tinyad.kernel", "tinyad.launch", "tinyad.checkedlaunch",  # launch: its checks
                "tinyad.tapekernels"}),
    ("tape", {"tinyad.ad", "tinyad.tapecheck"}),        # ad.py: Tape and FwdMode (and ti.ad)
    ("capture", {"tinyad.capture", "tinyad.checkedreplay", "tinyad.checkwatch",  # replayed
                 "tinyad.checkpredicates", "tinyad.replaystate",
                 "tinyad.checkstate"}),               # launches and Tapes (checked too)
    ("verification", {"tinyad.gradverify", "tinyad.secondorder", "tinyad.funcad",
                      "tinyad.customcheck"}),
    ("explain", {"tinyad.explain"}),
    ("package", {"tinyad"}),                            # tinyad/__init__.py: `import tinyad`
]

# Imports down the API's floors the wrong way, each with why it stays.
API_DEBT: dict[tuple[str, str], str] = {
    # ti.ad is both the namespace and Tape's home (ad.py): the namespace forwards to what
    # stands above the Tape; splitting ad.py into tape.py and a namespace ends these
    ("tinyad.ad", "tinyad.gradverify"): "the ti.ad namespace: ti.ad.verify, ti.ad.check",
    ("tinyad.ad", "tinyad.secondorder"): "the ti.ad namespace: ti.ad.hessian_vector_product",
    ("tinyad.ad", "tinyad.funcad"): "the ti.ad namespace: ti.ad.grad, jvp, vjp of a ti.func",
    ("tinyad.ad", "tinyad.customcheck"):
        "the Tape checks each custom gradient with gradverify's dot-product test",
    ("tinyad.kernel", "tinyad.explain"):
        "compact_ir, a formatter of printed IR that belongs in core/printer.py",
}

# Import circles inside a layer that exist today (each a set of modules). A new circle, or a
# module joining one, fails; a circle that shrinks or goes must be updated here.
CIRCLES = [
    # The core's one circle: the builder types an op by its row in the op table, and the
    # table's derivative rules (partials, jvp) build IR with the builder
    {"tinyad.core.builder", "tinyad.core.ops"},
    # ti.ad is both the namespace and Tape's home: what the Tape calls (custom-gradient checks,
    # field operations' kernels) and what calls the Tape (verification) meet in ad.py
    {"tinyad.ad", "tinyad.customcheck", "tinyad.explain", "tinyad.gradverify", "tinyad.kernel",
     "tinyad.secondorder", "tinyad.tapekernels"},
    {"tinyad.frontend.linalg", "tinyad.frontend.matrix"},   # Matrix.determinant/inverse
]

# Library modules that import a module by a name computed at run time, each with where the
# names come from (string literals the import scan reads, or why there are none).
DYNAMIC_IMPORTS = {
    "tinyad.backend": "BACKENDS and NONFINITE_LOCATOR, module names written out as strings",
}

# Library files over 600 lines, each at most at its size today, and why.
LONG_FILES = {
    "compile/pysource.py": 653,         # the bounds guard (compile/badindex.py) wiring; to split
    "tinyad/frontend/tracer.py": 663,   # the statement visitor; constructs move out one by one
                                        # (fill.py, atomics.py, printing.py)
}
MAX_LINES = 600


@functools.lru_cache(maxsize=None)
def _tree(path: pathlib.Path) -> ast.Module:
    """A file's syntax tree, parsed once for all the tests (each walks every library file)."""
    return ast.parse(path.read_text(), str(path))


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts[:2] in (["tinyad", "interp"], ["tinyad", "compile"]):
        return parts[1]
    if len(parts) >= 2 and parts[1] in ("core", "analysis", "check", "autodiff", "frontend",
                                        "backend"):
        return parts[1]
    if parts[1:] == ["notices"]:
        return "notices"
    if len(parts) >= 2 and parts[1] in ("cli", "lessons"):
        return "tools"
    return "api"


def modules():
    """-> {module name: path} for every module of the three folders."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def imports_of(module: str, path: pathlib.Path):
    """The tinyad names `module` imports, anywhere in its body, by statement or by a string
    that is exactly a module's name (what importlib.import_module and registries take)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                re.fullmatch(r"tinyad(\.\w+)+", node.value):
            names = [node.value]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[:len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from tinyad.core import ir` imports the module tinyad.core.ir; `from
            # tinyad.core.ir import Kernel` resolves to the module tinyad.core.ir
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "tinyad":
                yield name


def resolve(name: str, known) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def edges_of(module: str, path: pathlib.Path, known) -> set[str]:
    """The library modules `module` imports. Its own packages are imported before it anyway
    (`from tinyad.compile import cache` in tinyad.compile.cpu is no import of
    tinyad/compile/__init__.py), except the root package: `import tinyad` imports all of it."""
    found = set()
    for imported in imports_of(module, path):
        target = resolve(imported, known)
        if target and target != module and (target == "tinyad"
                                            or not module.startswith(target + ".")):
            found.add(target)
    return found


def import_graph(known=None) -> dict[str, set[str]]:
    known = known if known is not None else modules()
    return {module: edges_of(module, path, known) for module, path in known.items()}


def layer_violations(graph: dict[str, set[str]], debt=DEBT) -> tuple[list[str], set]:
    """-> (the imports against the layers that DEBT does not list, the DEBT entries seen)."""
    found, violations = set(), []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if layer_of(target) in ALLOWED[layer_of(module)]:
                continue
            found.add((module, target))
            if (module, target) not in debt:
                violations.append(f"{module} ({layer_of(module)}) imports {target} "
                                  f"({layer_of(target)})")
    return violations, found


def floor_of(module: str, floors=API_FLOORS) -> int | None:
    return next((n for n, (_, members) in enumerate(floors) if module in members), None)


def floor_violations(graph: dict[str, set[str]], floors=API_FLOORS,
                     debt=API_DEBT) -> tuple[list[str], set]:
    """-> (API modules on no floor, and imports up the API's floors that API_DEBT does not
    list; the API_DEBT entries seen)."""
    found, violations = set(), []
    for module, targets in sorted(graph.items()):
        if layer_of(module) != "api":
            continue
        mine = floor_of(module, floors)
        if mine is None:
            violations.append(f"{module} stands on no floor: add it to API_FLOORS")
            continue
        for target in sorted(t for t in targets if layer_of(t) == "api"):
            theirs = floor_of(target, floors)
            if theirs is not None and theirs <= mine:
                continue
            found.add((module, target))
            if (module, target) not in debt:
                violations.append(f"{module} ({floors[mine][0]}) imports {target} "
                                  f"({'no floor' if theirs is None else floors[theirs][0]})")
    return violations, found


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The import circles among modules of one layer: the strongly connected components (of
    two or more modules) of the graph restricted to same-layer edges (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if layer_of(nxt) != layer_of(node):
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


FOLDERS = ("interp", "compile", "lessons", "examples", "benchmarks", "tests")


def bare_imports(module: str, path: pathlib.Path) -> list[str]:
    """The repository's folders `module` imports by their bare names (`import interp`,
    `from compile.cpu import ...`, `importlib.import_module("interp.backend")`)."""
    bare = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                re.fullmatch(rf"({'|'.join(FOLDERS)})(\.\w+)+", node.value):
            names = [node.value]
        else:
            continue
        bare += [f"{module} imports {n}" for n in names if n.split(".")[0] in FOLDERS]
    return bare


def dynamic_imports(path: pathlib.Path) -> list[int]:
    """Lines where `path` imports a module whose name is not a string literal
    (importlib.import_module(name), __import__(name)): imports the scan cannot follow."""
    lines = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else \
            node.func.id if isinstance(node.func, ast.Name) else None
        if called in ("import_module", "__import__") and not (
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            lines.append(node.lineno)
    return lines


def prints(path: pathlib.Path) -> list[int]:
    """Lines where `path` prints: print(...), or a write to sys.stdout / sys.stderr."""
    lines = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "print" or \
                isinstance(func, ast.Attribute) and func.attr == "write" and \
                isinstance(func.value, ast.Attribute) and func.value.attr in ("stdout", "stderr"):
            lines.append(node.lineno)
    return lines


def too_long(sizes: dict[str, int], allowed=LONG_FILES) -> tuple[dict, dict]:
    """-> (files over MAX_LINES beyond their allowance, LONG_FILES entries now shorter)."""
    long = {name: n for name, n in sizes.items() if n > MAX_LINES and n > allowed.get(name, 0)}
    shrunk = {name: limit for name, limit in allowed.items()
              if name in sizes and sizes[name] < limit}
    return long, shrunk


# ---- the library as it is ------------------------------------------------------------------

def test_imports_point_down_the_layers():
    violations, found = layer_violations(import_graph())
    assert not violations, "imports against the layers:\n  " + "\n  ".join(violations)
    paid = sorted(set(DEBT) - found)
    assert not paid, f"these are fixed: remove them from DEBT: {paid}"


def test_api_modules_import_down_their_floors():
    violations, found = floor_violations(import_graph())
    assert not violations, "imports up the API's floors:\n  " + "\n  ".join(violations)
    paid = sorted(set(API_DEBT) - found)
    assert not paid, f"these are fixed: remove them from API_DEBT: {paid}"
    placed = set().union(*(members for _, members in API_FLOORS))
    gone = sorted(placed - set(modules()))
    assert not gone, f"API_FLOORS names modules that are gone: {gone}"


def test_no_new_import_circle_inside_a_layer():
    found = circles(import_graph())
    new = [sorted(c) for c in found if c not in CIRCLES]
    assert not new, f"import circles inside a layer (break them, or explain in CIRCLES): {new}"
    gone = [sorted(c) for c in CIRCLES if c not in found]
    assert not gone, f"these circles changed or are gone: update CIRCLES: {gone}"


def test_the_core_has_one_documented_circle():
    """The core's modules form no circle but builder <-> ops (see CIRCLES)."""
    core = [c for c in circles(import_graph()) if layer_of(next(iter(c))) == "core"]
    assert core == [{"tinyad.core.builder", "tinyad.core.ops"}], core


def test_the_core_never_prints():
    """The core raises or returns; notices go through tinyad/notices.py, above it."""
    found = {module: lines for module, path in modules().items()
             if layer_of(module) == "core" and (lines := prints(path))}
    assert not found, f"the core prints: {found}"


def test_no_generic_top_level_packages():
    """interp/ and compile/ install as tinyad.interp and tinyad.compile, never as `interp`: no
    library module imports one of the repository's folders by its bare name."""
    bare = [b for module, path in modules().items() for b in bare_imports(module, path)]
    assert not bare, bare
    text = (ROOT / "pyproject.toml").read_text()
    assert '"tinyad.interp" = "interp"' in text and '"tinyad.compile" = "compile"' in text


def test_every_dynamic_import_is_listed():
    found = {module for module, path in modules().items() if dynamic_imports(path)}
    unlisted = sorted(found - set(DYNAMIC_IMPORTS))
    assert not unlisted, f"imports by a computed name (list them in DYNAMIC_IMPORTS): {unlisted}"
    gone = sorted(set(DYNAMIC_IMPORTS) - found)
    assert not gone, f"these import nothing by a computed name now: {gone}"


def test_the_wheel_installs_only_the_tinyad_package():
    """Every package pyproject.toml installs lives under `tinyad` (a wheel that installed a
    top-level `benchmarks` shadowed, or was shadowed by, a user's own folder of that name)."""
    tomllib = pytest.importorskip("tomllib")    # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = config["packages"] + list(config.get("package-dir", {}))
    assert packages and all(p == "tinyad" or p.startswith("tinyad.") for p in packages), packages


def test_library_files_stay_under_600_lines():
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
             for folder in ("tinyad", "interp", "compile") for path in (ROOT / folder).rglob("*.py")}
    long, shrunk = too_long(sizes)
    assert not long, f"files over {MAX_LINES} lines (split them by purpose): {long}"
    assert not shrunk, f"these are shorter now: lower (or drop) their LONG_FILES entry: {shrunk}"
    gone = sorted(set(LONG_FILES) - set(sizes))
    assert not gone, f"LONG_FILES names files that are gone: {gone}"


# ---- each check fails on a made-up bad library ----------------------------------------------

def _module(tmp_path, name: str, source: str) -> pathlib.Path:
    path = tmp_path / f"{name.replace('.', '_')}.py"
    path.write_text(source)
    return path


def test_a_function_level_import_or_a_module_string_against_the_layers_fails(tmp_path):
    """An upward import hidden in a function, or named by a string, is seen; the clean twin
    (the same imports pointing down) passes."""
    known = {name: None for name in ("tinyad.core.ir", "tinyad.check.rules",
                                     "tinyad.compile.backend", "tinyad.interp.backend")}
    bad = _module(tmp_path, "tinyad.check.rules",
                  "from tinyad.core import ir\n\n\ndef f():\n"
                  "    from tinyad.compile import backend  # noqa: PLC0415\n"
                  "    import importlib\n"
                  "    return importlib.import_module('tinyad.interp.backend')\n")
    graph = {name: set() for name in known}
    graph["tinyad.check.rules"] = edges_of("tinyad.check.rules", bad, known)
    violations, _ = layer_violations(graph)
    assert violations == ["tinyad.check.rules (check) imports tinyad.compile.backend (compile)",
                          "tinyad.check.rules (check) imports tinyad.interp.backend (interp)"]
    clean = _module(tmp_path, "tinyad.compile.backend",
                    "def f():\n    from tinyad.check import rules  # noqa: PLC0415\n")
    graph = {name: set() for name in known}
    graph["tinyad.compile.backend"] = edges_of("tinyad.compile.backend", clean, known)
    assert graph["tinyad.compile.backend"] == {"tinyad.check.rules"}
    assert layer_violations(graph)[0] == []


def test_an_import_of_the_root_package_from_below_fails(tmp_path):
    """`import tinyad` (or a name it re-exports) inside the library's lower layers imports the
    whole API: it is no import of the module's own package."""
    known = {"tinyad": None, "tinyad.core.ir": None, "tinyad.interp.backend": None}
    bad = _module(tmp_path, "tinyad.interp.backend",
                  "def f():\n    from tinyad import Tape  # noqa: PLC0415\n")
    graph = {"tinyad": set(), "tinyad.core.ir": set(),
             "tinyad.interp.backend": edges_of("tinyad.interp.backend", bad, known)}
    assert layer_violations(graph)[0] == ["tinyad.interp.backend (interp) imports tinyad (api)"]


def test_an_import_up_the_api_floors_fails():
    floors = [("runtime", {"tinyad.runtime"}), ("kernel", {"tinyad.kernel"}),
              ("tape", {"tinyad.ad"})]
    graph = {"tinyad.runtime": {"tinyad.kernel"}, "tinyad.kernel": {"tinyad.runtime"},
             "tinyad.ad": {"tinyad.kernel", "tinyad.core.ir"}, "tinyad.newthing": set()}
    violations, _ = floor_violations(graph, floors, debt={})
    assert violations == ["tinyad.newthing stands on no floor: add it to API_FLOORS",
                          "tinyad.runtime (runtime) imports tinyad.kernel (kernel)"]
    assert floor_violations(graph, floors, debt={("tinyad.runtime", "tinyad.kernel"): "why"}
                            )[0] == violations[:1]
    del graph["tinyad.newthing"], graph["tinyad.runtime"]
    assert floor_violations(graph, floors, debt={}) == ([], set())


def test_the_circle_check_sees_a_function_level_import_and_an_importlib_string(tmp_path):
    """The two ways an import hid from this test before: inside a function, and by string.
    A circle across layers is no circle inside one."""
    known = {"tinyad.core.a": None, "tinyad.core.b": None}
    path = _module(tmp_path, "b", "def f():\n    import importlib\n"
                                   "    return importlib.import_module('tinyad.core.a')\n")
    graph = {"tinyad.core.a": {"tinyad.core.b"},
             "tinyad.core.b": edges_of("tinyad.core.b", path, known)}
    assert circles(graph) == [{"tinyad.core.a", "tinyad.core.b"}]
    assert circles({"tinyad.core.a": {"tinyad.check.b"},
                    "tinyad.check.b": {"tinyad.core.a"}}) == []
    assert circles({"tinyad.core.a": {"tinyad.core.b"}, "tinyad.core.b": set()}) == []


def test_a_bare_folder_import_fails(tmp_path):
    path = _module(tmp_path, "m", "import numpy\nfrom tinyad.core import ir\n\n\ndef f():\n"
                                  "    from interp.backend import Program  # noqa: PLC0415\n"
                                  "    import importlib\n"
                                  "    return importlib.import_module('compile.cpu')\n")
    assert bare_imports("tinyad.m", path) == ["tinyad.m imports interp.backend",
                                              "tinyad.m imports compile.cpu"]
    clean = _module(tmp_path, "n", "MODE = 'interp'\nfrom tinyad.interp import backend\n")
    assert bare_imports("tinyad.n", clean) == []


def test_a_dynamic_import_is_seen(tmp_path):
    path = _module(tmp_path, "m", "import importlib\n\n\ndef load(name):\n"
                                  "    return importlib.import_module(name)\n\n\n"
                                  "def other(name):\n    return __import__(name)\n")
    assert dynamic_imports(path) == [5, 9]
    clean = _module(tmp_path, "n", "import importlib\n\n\n"
                                   "def load():\n    return importlib.import_module('tinyad.x')\n")
    assert dynamic_imports(clean) == []


def test_a_long_file_fails():
    allowed = {"compile/big.py": 650}
    assert too_long({"tinyad/a.py": 601, "compile/big.py": 650, "tinyad/b.py": 600},
                    allowed) == ({"tinyad/a.py": 601}, {})
    assert too_long({"compile/big.py": 651}, allowed) == ({"compile/big.py": 651}, {})
    assert too_long({"compile/big.py": 640}, allowed) == ({}, {"compile/big.py": 650})


def test_a_print_is_seen(tmp_path):
    path = _module(tmp_path, "m", "import sys\n\n\ndef f(x):\n    print(x)\n"
                                  "    sys.stderr.write(x)\n    return f'print({x})'\n")
    assert prints(path) == [5, 6]
    clean = _module(tmp_path, "n", "def f(x):\n    return f'print({x})'\n")
    assert prints(clean) == []
