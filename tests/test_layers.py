"""The layers of tinyad, and a test that keeps imports pointing down them.

Every module of tinyad belongs to one layer; a layer may import only the layers listed for it.
Imports inside functions count too: hiding an upward import in a function is still a cycle; so
does a module named by a string (`importlib.import_module("tinyad.interp.backend")`, a
registry's entry). Inside a layer, modules may not import each other in a circle, and no
library file grows past 600 lines; the exceptions are listed below with their reasons, and the
lists may only shrink.

    core      tinyad/core/       the IR: types, errors, nodes, op table, builder, printer, analyses,
                                 notices
    check     tinyad/check/      the rule catalogue (every rule's error, report and rendering) and
                                 the launch checks both backends run
    autodiff  tinyad/autodiff/   IR -> IR transforms (reverse and forward mode)
    frontend  tinyad/frontend/   Python source -> IR, and the kernel language (lang, math, matrix)
    backend   tinyad/backend.py  the protocol a backend implements, and the registry of backends
    interp    interp/            the interpreter backend, its rule checker and the sympy domain
    compile   compile/           the numba backend (CPU and CUDA) and its rule checker
    api       tinyad/*.py        what users call: fields, kernels, Tape, verification, runtime
    tools     cli, lessons       commands on top of the API

Where to add things: an op is a row in core/ops.py (plus its backend spellings); a rule is a
constructor in check/rules.py; a transform is a module in autodiff/; a backend is a package that
implements tinyad/backend.py and is named in its registry, `BACKENDS`.
"""
import ast
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

# Library files over 600 lines, each at most at its size today.
LONG_FILES = {
    "compile/pysource.py": 677,         # the bounds guard (compile/badindex.py) wiring; to split
    "tinyad/frontend/tracer.py": 663,
}
MAX_LINES = 600


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
    """The tinyad modules `module` imports, anywhere in its body, by statement or by a string
    that is exactly a module's name (what importlib.import_module and registries take)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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
            # `from tinyad.core import ir` imports the module tinyad.core.ir
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "tinyad":
                yield name


def resolve(name: str, known) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def test_imports_point_down_the_layers():
    known = modules()
    found, violations = set(), []
    for module, path in sorted(known.items()):
        for imported in imports_of(module, path):
            target = resolve(imported, known)
            if target is None or target == "tinyad" and imported != "tinyad":
                continue              # a name from the package's __init__ resolved above
            if layer_of(target) in ALLOWED[layer_of(module)]:
                continue
            found.add((module, target))
            if (module, target) not in DEBT:
                violations.append(f"{module} ({layer_of(module)}) imports {target} "
                                  f"({layer_of(target)})")
    assert not violations, "imports against the layers:\n  " + "\n  ".join(sorted(set(violations)))
    paid = sorted(set(DEBT) - found)
    assert not paid, f"these are fixed: remove them from DEBT: {paid}"


def test_no_generic_top_level_packages():
    """interp/ and compile/ install as tinyad.interp and tinyad.compile, never as `interp`: no
    library module imports one of the repository's folders by its bare name."""
    folders = {"interp", "compile", "lessons", "examples", "benchmarks", "tests"}
    bare = []
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bare += [f"{module} imports {n}" for n in names if n.split(".")[0] in folders]
    assert not bare, bare
    text = (ROOT / "pyproject.toml").read_text()
    assert '"tinyad.interp" = "interp"' in text and '"tinyad.compile" = "compile"' in text


def test_the_wheel_installs_only_the_tinyad_package():
    """Every package pyproject.toml installs lives under `tinyad` (a wheel that installed a
    top-level `benchmarks` shadowed, or was shadowed by, a user's own folder of that name)."""
    tomllib = pytest.importorskip("tomllib")    # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = config["packages"] + list(config.get("package-dir", {}))
    assert packages and all(p == "tinyad" or p.startswith("tinyad.") for p in packages), packages


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph = {module: set() for module in known}
    for module, path in known.items():
        for imported in imports_of(module, path):
            target = resolve(imported, known)
            # a module's own packages are imported before it anyway: `from tinyad.compile
            # import cache` in tinyad.compile.cpu is no circle with tinyad/compile/__init__.py
            if target and not module.startswith(target + ".") and target != module:
                graph[module].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The import circles among modules of one layer: the strongly connected components (of
    two or more modules) of the graph restricted to same-layer edges (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
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


def test_no_new_import_circle_inside_a_layer():
    found = circles(import_graph())
    new = [sorted(c) for c in found if c not in CIRCLES]
    assert not new, f"import circles inside a layer (break them, or explain in CIRCLES): {new}"
    gone = [sorted(c) for c in CIRCLES if c not in found]
    assert not gone, f"these circles changed or are gone: update CIRCLES: {gone}"


def test_the_circle_check_sees_a_function_level_import_and_an_importlib_string(tmp_path):
    """The two ways an import hid from this test before: inside a function, and by string."""
    graph = {"tinyad.core.a": {"tinyad.core.b"}, "tinyad.core.b": set()}
    path = tmp_path / "b.py"
    path.write_text("def f():\n    import importlib\n"
                    "    return importlib.import_module('tinyad.core.a')\n")
    graph["tinyad.core.b"] = set(imports_of("tinyad.core.b", path))
    assert circles(graph) == [{"tinyad.core.a", "tinyad.core.b"}]


def test_library_files_stay_under_600_lines():
    long = {}
    for folder in ("tinyad", "interp", "compile"):
        for path in (ROOT / folder).rglob("*.py"):
            lines = len(path.read_text().splitlines())
            name = path.relative_to(ROOT).as_posix()
            if lines > MAX_LINES and lines > LONG_FILES.get(name, 0):
                long[name] = lines
    assert not long, f"files over {MAX_LINES} lines (split them by purpose): {long}"
    shrunk = {name: limit for name, limit in LONG_FILES.items()
              if len((ROOT / name).read_text().splitlines()) < limit}
    assert not shrunk, f"these are shorter now: lower (or drop) their LONG_FILES entry: {shrunk}"
