"""The layers of tinyad, and a test that keeps imports pointing down them.

Every module of tinyad belongs to one layer; a layer may import only the layers listed for it.
Imports inside functions count too: hiding an upward import in a function is still a cycle.

    core      tinyad/core/       the IR: types, errors, nodes, op table, builder, printer, analyses,
                                 notices
    check     tinyad/check/      the rule catalogue (every rule's error, report and rendering) and
                                 the launch checks both backends run
    autodiff  tinyad/autodiff/   IR -> IR transforms (reverse mode)
    frontend  tinyad/frontend/   Python source -> IR, and the kernel language (lang, math, matrix)
    backend   tinyad/backend.py  the protocol a backend implements
    interp    interp/            the interpreter backend, its rule checker and the sympy domain
    compile   compile/           the numba backend (CPU and CUDA) and its rule checker
    api       tinyad/*.py        what users call: fields, kernels, Tape, verification, runtime
    tools     cli, lessons       commands on top of the API

Where to add things: an op is a row in core/ops.py (plus its backend spellings); a rule is a
constructor in check/rules.py; a transform is a module in autodiff/; a backend is a package that
implements tinyad/backend.py and is named in the runtime's registry.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = {"tinyad": ROOT / "tinyad", "tinyad.interp": ROOT / "interp",
            "tinyad.compile": ROOT / "compile"}

ALLOWED = {
    "core": {"core"},
    "check": {"core", "check"},
    "autodiff": {"core", "check", "autodiff"},
    "frontend": {"core", "frontend"},
    "backend": {"core", "backend"},
    "interp": {"core", "check", "backend", "interp"},
    "compile": {"core", "check", "backend", "compile"},
    "api": {"core", "check", "autodiff", "frontend", "backend", "interp", "compile", "api"},
    "tools": {"core", "check", "autodiff", "frontend", "backend", "interp", "compile", "api",
              "tools"},
}

# Imports that break the layering, each with why it stays. Empty, and it stays that way: a new
# entry needs a reason a reviewer accepts.
DEBT: dict[tuple[str, str], str] = {}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts[:2] in (["tinyad", "interp"], ["tinyad", "compile"]):
        return parts[1]
    if len(parts) >= 2 and parts[1] in ("core", "check", "autodiff", "frontend", "backend"):
        return parts[1]
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
    """The tinyad modules `module` imports, anywhere in its body."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
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
    """interp/ and compile/ install as tinyad.interp and tinyad.compile, never as `interp`."""
    for module, path in modules().items():
        for imported in imports_of(module, path):
            assert imported.split(".")[0] == "tinyad"
    text = (ROOT / "pyproject.toml").read_text()
    assert '"tinyad.interp" = "interp"' in text and '"tinyad.compile" = "compile"' in text


def test_the_wheel_installs_only_the_tinyad_package():
    """Every package pyproject.toml installs lives under `tinyad` (a wheel that installed a
    top-level `benchmarks` shadowed, or was shadowed by, a user's own folder of that name)."""
    tomllib = pytest.importorskip("tomllib")    # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = config["packages"] + list(config.get("package-dir", {}))
    assert packages and all(p == "tinyad" or p.startswith("tinyad.") for p in packages), packages
