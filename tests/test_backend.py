"""The backend protocol (tinyad/backend.py): a backend is one entry in BACKENDS, and the API
layer (kernels, the Tape, fields) reaches the interpreter and numba only through it."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import numpy as np
import pytest

import tinyad as ti
from tinyad import backend as backends
from tinyad.interp.backend import InterpBackend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def imported_modules(path: str) -> set[str]:
    """Every module a file imports, at the top or inside functions."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", ["tinyad/kernel.py", "tinyad/ad.py", "tinyad/field.py",
                                  "tinyad/runtime.py", "tinyad/core/builder.py"])
def test_the_api_layer_imports_no_backend(path):
    modules = imported_modules(path)
    assert modules, path
    assert not [m for m in modules if m.startswith(("tinyad.interp", "tinyad.compile"))]


class CountingBackend(InterpBackend):
    """The interpreter, noting each launch: stands for a backend added by a user."""
    name = "counting"

    def __init__(self, config, rng):
        super().__init__(config, rng)
        self.launched = []
        self.backward_started_by = []

    def launching(self, traced, variant):
        self.launched.append((traced.ir.name, variant))

    def backward_starts(self, first):
        self.backward_started_by.append(first.ir.name)


def test_a_backend_registered_in_backends_runs_kernels_and_their_adjoints(monkeypatch):
    monkeypatch.setitem(backends.BACKENDS, "counting", (__name__, "CountingBackend"))
    ti.init(mode="counting", default_fp=ti.f64)
    try:
        backend = ti.runtime.runtime.backend
        assert isinstance(backend, CountingBackend)
        x = ti.field(ti.f64, shape=5, needs_grad=True)
        y = ti.field(ti.f64, shape=5, needs_grad=True)
        loss = ti.field(ti.f64, shape=(), needs_grad=True)

        @ti.kernel
        def square():
            for i in x:
                y[i] = x[i] * x[i]

        @ti.kernel
        def total():
            for i in y:
                loss[None] += ti.sin(y[i])

        values = np.linspace(0.1, 0.9, 5)
        x.from_numpy(values)
        with ti.ad.Tape(loss=loss):
            square()
            total()
        assert backend.launched == [("square", "primal"), ("total", "primal"),
                                    ("total", "adjoint"), ("square", "adjoint")]
        assert backend.backward_started_by == ["total", "square"]   # once per kernel's adjoint
        np.testing.assert_allclose(x.grad.to_numpy(), 2 * values * np.cos(values ** 2),
                                   rtol=1e-12)
    finally:
        ti.init()


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        ti.init(mode="no-such-backend")
    ti.init()


def test_interp_mode_never_imports_numba(tmp_path):
    """BACKENDS imports a backend's package only when its mode is used."""
    script = tmp_path / "program.py"
    script.write_text(
        "import sys\n"
        "import tinyad as ti\n"
        "ti.init(mode='interp')\n"
        "x = ti.field(ti.f32, shape=3, needs_grad=True)\n"
        "loss = ti.field(ti.f32, shape=(), needs_grad=True)\n"
        "@ti.kernel\n"
        "def k():\n"
        "    for i in x:\n"
        "        loss[None] += x[i] * x[i]\n"
        "with ti.ad.Tape(loss=loss):\n"
        "    k()\n"
        # a scatter the IR leaves open: its launch is recorded, and its trail judged
        "where = ti.field(ti.i32, shape=3)\n"
        "y = ti.field(ti.f32, shape=3, needs_grad=True)\n"
        "x[1] = 1.0\n"
        "@ti.kernel\n"
        "def scatter():\n"
        "    for i in x:\n"
        "        y[where[i]] = x[i] * 2\n"
        "try:\n"
        "    with ti.ad.Tape(loss=loss):\n"
        "        scatter()\n"
        "        k()\n"
        "except ti.ParallelConflictRuleError:\n"
        "    print('conflict')\n"
        "print(sorted(m for m in ('numba', 'tinyad.compile') if m in sys.modules))\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TINYAD_MODE", None)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-2:] == ["conflict", "[]"]


def test_every_variant_a_traced_kernel_derives_has_its_checks():
    """tinyad/launch.py names the checks around each variant's run once, for every backend: a
    variant TracedKernel.DERIVED can make has its row (else its checked launch would fail)."""
    from tinyad import launch
    from tinyad.kernel import TracedKernel
    assert set(launch.VARIANTS) == {"primal", *TracedKernel.DERIVED}


def test_what_is_worked_out_about_a_kernel_is_kept_in_its_memos_not_set_on_it(mode):
    """The checkers and backends keep what they work out once per kernel in `traced.memos`,
    declared, never as attributes they set on the traced kernel: after forward, Tape, manual
    .grad() and forward-mode launches, a traced kernel holds no attribute that its __init__ or
    its class does not declare."""
    from tinyad.kernel import TracedKernel
    n = 6
    x = ti.field(ti.f64, shape=n, needs_grad=True, needs_dual=True)
    y = ti.field(ti.f64, shape=n, needs_grad=True, needs_dual=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)

    @ti.kernel
    def square(m: ti.i32):
        for i in range(m):
            y[i] = x[i] * x[i]

    @ti.kernel
    def total():
        for i in y:
            loss[None] += y[i]

    values = np.linspace(0.5, 1.5, n)
    x.from_numpy(values)
    with ti.ad.Tape(loss=loss):
        square(n)
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * values, rtol=1e-12)
    square(n)
    y.grad.fill(1.0)
    x.grad.fill(0.0)
    square.grad(n)                       # a manual sweep's adjoint
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * values, rtol=1e-12)
    with ti.ad.FwdMode(loss=loss, param=x, seed=[1.0] + [0.0] * (n - 1)):
        loss[None] = 0.0
        square(n)
        total()
    assert loss.dual[None] == pytest.approx(2 * values[0], rel=1e-12)
    for kernel in (square, total):
        (traced,) = kernel._traces.values()
        undeclared = set(vars(traced)) - set(vars(TracedKernel(traced.ir))) - set(dir(TracedKernel))
        assert not undeclared, (kernel.fn.__name__, undeclared)
        assert traced.memos       # (the checkers did keep what they worked out)
