"""Fast mode's CUDA path without a GPU: lowering through the real compiler, and running in
numba's simulator.

The simulator runs the generated Python and never lowers it, so the first run on a GPU failed
at every program's first kernel; compile/ptx.py lowers each kernel for sm_90 and sm_80 through
NVIDIA's NVVM instead (here, and for every fast-mode test under TINYAD_TEST_ARCH=cuda-ptx, as CI
runs). Both need the `cuda` extra; CI installs it, so there they must not skip.
"""
import importlib.abc
import os
import sys

import numpy as np
import pytest

import tinyad as ti
from tests.cuda_simulator import simulator_program
from tests.test_fast_backend import run_script
from tinyad import compile as fast_compile
from tinyad.compile import ptx
from tinyad.compile.cudasource import generate_cuda


def _lowering_available() -> str | None:
    """Why PTX cannot be made here, or None."""
    try:
        from numba import config
        if config.ENABLE_CUDASIM:
            return "numba's CUDA simulator is on: it has no compiler"
        from numba import cuda
        if getattr(cuda, "implementation", "") != "NVIDIA":
            return "numba's built-in CUDA target, not numba-cuda (the cuda extra)"
        cuda.compile_ptx(lambda a: None, "void(float32[::1])", cc=(8, 0))
    except Exception as exc:     # noqa: BLE001  no numba-cuda, or no NVVM/NVRTC libraries
        return f"no CUDA compiler ({type(exc).__name__}: {str(exc)[:200]})"
    return None


@pytest.fixture(scope="module")
def lowering():
    why = _lowering_available()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs the cuda extra, yet {why}")
        pytest.skip(why)


def _program():
    """Kernels with what a real program's CUDA code holds: a loss summed into a 0-d field,
    1-D and vector fields, a loop carrying a local (a save stack in the adjoint), random
    numbers, an atomic max, a return value."""
    ti.init(mode="fast", default_fp=ti.f32)
    n = 16
    x = ti.field(ti.f32, n, needs_grad=True)
    v = ti.Vector.field(3, ti.f32, n, needs_grad=True)
    loss = ti.field(ti.f32, (), needs_grad=True)
    top = ti.field(ti.i32, ())

    @ti.kernel
    def chain():
        for i in range(n):
            s = 0.0
            for j in range(3):
                s = s * 0.5 + ti.exp(x[i])
            v[i][i % 3] += s
            ti.atomic_max(top[None], ti.cast(ti.random() * 10, ti.i32))

    @ti.kernel
    def energy() -> ti.f32:
        for i in x:
            loss[None] += x[i] ** 2 + ti.sin(v[i].norm())
        return loss[None]

    return chain, energy


def test_every_variant_of_a_program_lowers_to_ptx_for_sm90_and_sm80(lowering):
    chain, energy = _program()
    irs = [ir for k in (chain, energy) for ir in (k.ir, k.grad.ir, k.fwd.ir)]
    for kernel_ir in irs:
        out = ptx.lower(kernel_ir, ((9, 0), (8, 0)))
        assert out, kernel_ir.name
        for (segment, cc), text in out.items():
            assert f".target sm_{cc[0]}{cc[1]}" in text, (segment, cc)
    loss_ptx = "".join(ptx.lower(irs[3]).values())
    assert "atom.global.add.f32" in loss_ptx           # one add per block, not per element
    assert "bar.sync" in loss_ptx                       # the block's sum


def test_a_kernel_that_does_not_lower_is_named(lowering, monkeypatch):
    """The check can fail: the one-element tuple index that stopped every program on the GPU."""
    _, energy = _program()
    kernel_ir = energy.ir
    from tinyad.compile.pyexpr import ExprWriter
    monkeypatch.setattr(ExprWriter, "atomic_index",
                        lambda self, ix: f"({', '.join(self.value(i) for i in ix) or '0'},)")
    with pytest.raises(ptx.CudaLoweringError, match=r"kernel energy: segment energy_0 does not "
                                                    r"lower for CUDA sm_80"):
        ptx.lower(kernel_ir)


def test_signature_is_what_the_launcher_passes():
    _, energy = _program()
    gen = generate_cuda(energy.ir)
    # x, loss (0-d: one element), v (3-vectors), the error flag, the return slot
    assert ptx.signature(gen) == "void(float32[::1], float32[::1], float32[:, ::1], int32[::1], " \
                                 "float32[::1])"
    assert ptx.compute_capabilities("9.0, 8.0") == ((9, 0), (8, 0))
    assert ptx.compute_capabilities("") == ()


SUM_SCRIPT = simulator_program('''
    import numpy as np
    import tinyad as ti

    def run(mode, arch):
        ti.init(mode=mode, arch=arch, default_fp=ti.f32)
        n = 1024
        x = ti.field(ti.f32, n, needs_grad=True)
        big = ti.field(ti.f32, n)
        loss = ti.field(ti.f32, (), needs_grad=True)
        total = ti.field(ti.f32, ())

        @ti.kernel
        def compute_loss():
            for i in x:
                loss[None] += 0.5 * x[i] ** 2
                total[None] += big[i]

        values = np.linspace(-1, 1, n, dtype=np.float32)
        x.from_numpy(values)
        ones = np.ones(n, np.float32)
        ones[0] = 2.0 ** 24      # one f32 atomic per element would drop every 1.0 after it
        big.from_numpy(ones)
        with ti.ad.Tape(loss):
            compute_loss()
        return {"loss": float(loss[None]), "grad": x.grad.to_numpy().tolist(),
                "total": float(total[None]), "x": values.tolist()}

    out = {"fast": run("fast", ti.cuda), "interp": run("interp", ti.cpu)}
    from tinyad import compile as fast_compile
    out["backend"] = fast_compile.backend_for("cuda")
    print(json.dumps(out))
''')


def test_a_loss_is_summed_per_block_on_cuda(tmp_path):
    """Every thread adds its iterations' terms into its own accumulator; the block sums them in
    shared memory and adds once: the small terms survive a large sum (simulator)."""
    cache = tmp_path / "cache"
    out = run_script(SUM_SCRIPT, tmp_path, NUMBA_ENABLE_CUDASIM="1", TINYAD_CACHE_DIR=str(cache))
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["backend"] == "cuda"
    fast, x = out["fast"], np.array(out["fast"]["x"], np.float64)
    np.testing.assert_allclose(fast["loss"], 0.5 * (x ** 2).sum(), rtol=1e-5)
    np.testing.assert_allclose(fast["grad"], x, rtol=1e-6)        # d(x^2/2)/dx = x
    np.testing.assert_allclose(fast["loss"], out["interp"]["loss"], rtol=1e-5)
    # exact: 2^24 + 1023; the thread that holds 2^24 loses its own few ones, no more
    assert abs(fast["total"] - (2.0 ** 24 + 1023)) <= 8, fast["total"]
    sources = "".join(p.read_text() for p in cache.glob("compute_loss_*.py"))
    assert "cuda.shared.array(MAX_THREADS" in sources and "cuda.syncthreads()" in sources


def test_a_numba_cuda_that_cannot_run_with_this_numpy_is_said(monkeypatch, capsys):
    """numba-cuda 0.30 imports, and finds the GPU, but fails at the first launch under numpy 2.5
    (np.row_stack): tinyad asks before choosing CUDA, says why, and runs on the CPU."""
    from numba import config, cuda
    if config.ENABLE_CUDASIM or getattr(cuda, "implementation", "") != "NVIDIA":
        if os.environ.get("CI"):
            pytest.fail("CI installs the cuda extra, yet numba-cuda is not numba's CUDA target")
        pytest.skip("numba-cuda is not installed (the cuda extra)")

    class NumpyWithoutRowStack(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "numba.cuda.np.arrayobj":
                raise AttributeError("module 'numpy' has no attribute 'row_stack'")

    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.delitem(sys.modules, "numba.cuda.np.arrayobj", raising=False)
    monkeypatch.setattr(sys, "meta_path", [NumpyWithoutRowStack(), *sys.meta_path])
    monkeypatch.setattr(fast_compile, "_cuda_why_not", None)
    reason = fast_compile.cuda_unavailable_reason()
    assert "row_stack" in reason and 'pip install -e ".[cuda]"' in reason
    ti.init(mode="fast", arch=ti.gpu)
    assert "row_stack" in capsys.readouterr().err
    x = ti.field(ti.f32, 4)

    @ti.kernel
    def fill():
        for i in x:
            x[i] = i * 2.0

    fill()
    assert x.to_numpy().tolist() == [0.0, 2.0, 4.0, 6.0]     # on the CPU


def test_tinyad_arch_chooses_the_device_of_an_init_that_names_none(monkeypatch, capsys):
    """TINYAD_ARCH, as Taichi's TI_ARCH (pytest's --arch cuda sets it for the whole suite)."""
    from tinyad.runtime import runtime
    monkeypatch.setenv("TINYAD_ARCH", "cuda")
    ti.init(mode="fast")
    assert runtime.config.arch == "cuda"
    expected = "cuda" if fast_compile.cuda_available() else "cpu"
    assert runtime.backend.target == expected
    if expected == "cpu":
        assert "ti.init(arch=cuda)" in capsys.readouterr().err
    ti.init(mode="fast", arch=ti.cpu)             # named: the environment does not override
    assert runtime.config.arch == "cpu"


def _gather_program():
    """A gather through an index field and a scatter at a float-computed index: accesses the
    bad-index flag guards (compile/badindex.py)."""
    ti.init(mode="fast", default_fp=ti.f32)
    n = 16
    x = ti.field(ti.f32, n, needs_grad=True)
    idx = ti.field(ti.i32, n)
    grid = ti.Vector.field(2, ti.f32, (4, 4), needs_grad=True)

    @ti.kernel
    def gather():
        for i in range(n):
            base = ti.cast(x[i] * 4, ti.i32)
            grid[base, 3 - base][1] += x[idx[i]]

    return gather


def test_a_guarded_access_lowers_to_ptx(lowering):
    gather = _gather_program()
    for kernel_ir in (gather.ir, gather.grad.ir):
        gen = generate_cuda(kernel_ir)
        assert gen.bad_slots == 4 and "in_bounds3(" in gen.source, gen.source
        assert ptx.signature(gen).endswith(", int64[::1])")
        out = ptx.lower(kernel_ir, ((9, 0), (8, 0)))
        assert "atom.global.cas.b64" in "".join(out.values())    # the record's claim


BAD_INDEX_SCRIPT = simulator_program('''
    import numpy as np
    import tinyad as ti

    ti.init(mode="fast", arch=ti.cuda, default_fp=ti.f32)
    n = 64
    x = ti.field(ti.f32, n)
    idx = ti.field(ti.i32, n)
    out = ti.field(ti.f32, n)

    @ti.kernel
    def gather():
        for i in range(n):
            out[i] = x[idx[i]]

    x.from_numpy(np.arange(n, dtype=np.float32))
    idx.from_numpy(np.arange(n)[::-1].astype(np.int32))
    gather()
    clean = out.to_numpy().tolist()
    idx[10] = -1
    try:
        gather()
        raised = None
    except ti.TinyadIndexError as exc:
        raised = str(exc)
    idx[10] = 5
    gather()
    from tinyad import compile as fast_compile
    print(json.dumps({"clean": clean, "raised": raised, "again": out.to_numpy().tolist(),
                      "backend": fast_compile.backend_for("cuda")}))
''')


def test_a_bad_index_is_reported_on_cuda(tmp_path):
    """The simulator runs the guard's device function: -1 is reported at the user's line, the
    clean launches before and after are right."""
    out = run_script(BAD_INDEX_SCRIPT, tmp_path, NUMBA_ENABLE_CUDASIM="1",
                     TINYAD_CACHE_DIR=str(tmp_path / "cache"))
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["backend"] == "cuda"
    assert out["clean"] == list(range(63, -1, -1))
    assert out["raised"] is not None
    assert "index (-1,) is out of bounds for field x of shape (64,)" in out["raised"]
    assert "out[i] = x[idx[i]]" in out["raised"]
    assert out["again"][10] == 5


def test_debug_guards_every_access_on_cuda():
    """Without debug only the accesses the IR cannot bound are guarded; with debug=True every
    one (CUDA code cannot raise, so debug's bounds checks are the flag there too)."""
    gather = _gather_program()
    plain, debug = generate_cuda(gather.ir), generate_cuda(gather.ir, debug=True)

    def guarded(gen):      # (field, column) of each guarded access
        return {(site.field.name, site.loc.col) for site in gen.sites}
    assert guarded(plain) == {("grid", 12), ("x", 39)}       # grid[base, ...], x[idx[i]]
    assert guarded(debug) == guarded(plain) | {("x", 27), ("idx", 41)}     # x[i], idx[i]


RECORDED_SCRIPT = simulator_program('''
    import numpy as np
    import tinyad as ti

    ti.init(mode="fast", arch=ti.cuda, default_fp=ti.f32)
    n = 16
    x = ti.field(ti.f32, n, needs_grad=True)
    y = ti.field(ti.f32, n, needs_grad=True)
    pos = ti.field(ti.f32, n)
    loss = ti.field(ti.f32, (), needs_grad=True)

    @ti.kernel
    def scatter():       # indices from a float field, in a loop of run-time length: recorded
        for i in x:
            for k in range(ti.cast(pos[0] * 0.0, ti.i32) + 1):
                j = ti.cast(pos[i] * n, ti.i32)
                y[j] = x[i] * 2.0
        for i in y:
            loss[None] += y[i] * y[i]

    x.from_numpy(np.linspace(0.5, 1.5, n).astype(np.float32))
    pos.from_numpy(((np.arange(n) + 0.5) / n).astype(np.float32))
    with ti.ad.Tape(loss):
        scatter()
    grad = x.grad.to_numpy().tolist()
    pos[5] = 4.5 / n                 # iterations 4 and 5 both store y[4]
    try:
        with ti.ad.Tape(loss):
            scatter()
        raised = None
    except ti.ParallelConflictRuleError as exc:
        raised = [list(exc.report.element), sorted(a.iteration for a in
                                                   (*exc.report.earlier, exc.report.write))]
    from tinyad.runtime import runtime
    recorded = any(r is not None for r in runtime.backend.recorders.values())
    from tinyad import compile as fast_compile
    print(json.dumps({"grad": grad, "x": x.to_numpy().tolist(), "raised": raised,
                      "recorded": recorded, "backend": fast_compile.backend_for("cuda")}))
''')


def test_a_recorded_launch_runs_on_cuda(tmp_path):
    """The recording variant (tinyad/check/accessrecord.py: its cursor's atomic, its record arrays
    sent to the device and back) runs in the simulator: the clean launch's gradient is the
    analytic one, and a race is the report interp mode gives."""
    out = run_script(RECORDED_SCRIPT, tmp_path, NUMBA_ENABLE_CUDASIM="1",
                     TINYAD_CACHE_DIR=str(tmp_path / "cache"))
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["backend"] == "cuda" and out["recorded"]
    np.testing.assert_allclose(out["grad"], 8 * np.array(out["x"]), rtol=1e-5)
    assert out["raised"] == [[4], [4, 5]]


def _stencil_program():
    """A base cell computed from a float plus static offsets: one checkpoint of base stands
    for the accesses' guards (tinyad/check/checkpoints.py)."""
    ti.init(mode="fast", default_fp=ti.f32)
    n = 16
    x = ti.Vector.field(2, ti.f32, n, needs_grad=True)
    grid = ti.Vector.field(2, ti.f32, (8, 8), needs_grad=True)

    @ti.kernel
    def p2g():
        for p in range(n):
            base = ti.cast(x[p] * 8 - 0.5, ti.i32)
            for i in ti.static(range(3)):
                for j in ti.static(range(3)):
                    grid[base + ti.Vector([i, j])] += x[p] * (i + j)

    return p2g


def test_a_checkpoint_lowers_to_ptx(lowering):
    p2g = _stencil_program()
    for kernel_ir in (p2g.ir, p2g.grad.ir):
        gen = generate_cuda(kernel_ir)
        assert "record2(" in gen.source and "in_bounds" not in gen.source, gen.source
        out = ptx.lower(kernel_ir, ((9, 0), (8, 0)))
        assert "atom.global.cas.b64" in "".join(out.values())    # the record's claim


CHECKPOINT_SCRIPT = simulator_program('''
    import numpy as np
    import tinyad as ti

    ti.init(mode="fast", arch=ti.cuda, default_fp=ti.f32)
    n = 16
    x = ti.Vector.field(2, ti.f32, n)
    grid = ti.Vector.field(2, ti.f32, (8, 8))

    @ti.kernel
    def p2g():
        for p in range(n):
            base = ti.cast(x[p] * 8 - 0.5, ti.i32)
            for i in ti.static(range(3)):
                for j in ti.static(range(3)):
                    grid[base + ti.Vector([i, j])] += x[p]

    x.from_numpy(np.full((n, 2), 0.3, np.float32))
    p2g()
    clean = float(grid.to_numpy().sum())
    x[3] = [0.5, 0.85]                         # base (3, 6): (3, 8) is one past the end
    try:
        p2g()
        raised = None
    except ti.TinyadIndexError as exc:
        raised = str(exc)
    print(json.dumps({"clean": clean, "raised": raised}))
''')


def test_a_checkpoint_is_reported_on_cuda(tmp_path):
    """The simulator runs the checkpoint's device function: the bad base is reported at the
    first access it puts out of bounds, as interp mode does."""
    out = run_script(CHECKPOINT_SCRIPT, tmp_path, NUMBA_ENABLE_CUDASIM="1",
                     TINYAD_CACHE_DIR=str(tmp_path / "cache"))
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["clean"] == pytest.approx(16 * 9 * 0.6)
    assert "index (3, 8) (component (0,)) is out of bounds for field grid" in out["raised"]
    assert "grid[base + ti.Vector([i, j])] += x[p]" in out["raised"]


CAPTURE_SCRIPT = simulator_program('''
    import json
    import numpy as np
    import tinyad as ti
    from tinyad.runtime import runtime

    ti.init(mode="fast", arch=ti.cuda, default_fp=ti.f32, check="off")
    n = 8
    x = ti.field(ti.f32, n, needs_grad=True)
    loss = ti.field(ti.f32, (), needs_grad=True)

    @ti.kernel
    def energy():
        for i in x:
            loss[None] += x[i] ** 3

    @ti.kernel
    def descend(rate: ti.f32):
        for i in x:
            x[i] -= rate * x.grad[i]

    def steps():
        for _ in range(3):
            with ti.ad.Tape(loss=loss):
                energy()
            descend(0.01)

    captured = ti.capture(steps)
    results = []
    for run in (steps, captured, captured, captured):
        x.from_numpy(np.linspace(0.5, 1.0, n).astype(np.float32))
        run()
        results.append(x.to_numpy().tolist())
    print(json.dumps({"backend": runtime.backend.target, "results": results,
                      "replays": captured.replays}))
''')


def test_a_captured_program_replays_on_cuda(tmp_path):
    """On CUDA a captured program replays the kernels' launchers in order (compile/sequence.py),
    its fills on the device: the values of the plain calls, every time."""
    out = run_script(CAPTURE_SCRIPT, tmp_path, NUMBA_ENABLE_CUDASIM="1",
                     TINYAD_CACHE_DIR=str(tmp_path / "cache"))
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["backend"] == "cuda" and out["replays"] == 2
    plain, *captured = out["results"]
    x = np.linspace(0.5, 1.0, 8)
    for _ in range(3):
        x = x - 0.01 * 3 * x ** 2       # d(x^3)/dx, the analytic gradient
    np.testing.assert_allclose(plain, x, rtol=1e-5)
    for result in captured:
        assert result == plain
