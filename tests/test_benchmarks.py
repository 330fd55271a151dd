"""The benchmark workloads (benchmarks/) are real Taichi programs. Fast mode must reproduce, at
full size, the f32 losses and gradients Taichi 1.7.4 gives for the same programs; interp mode's
rule checker must accept them (check="error") at small sizes, DiffTaichi's checkpointing in mpm
included. The Warp and JAX versions (benchmarks/peers/) compute the same numbers."""
import importlib
import os
import subprocess
import sys

import pytest

import tinyad as ti
from benchmarks import gravity, mass_spring, mpm, wave
from benchmarks.__main__ import WORKLOADS

MODULES = {"gravity": gravity, "mass_spring": mass_spring, "wave": wave, "mpm": mpm}
# f32 and f64 agree to 1e-3 on losses and 5e-3 on gradients for every anchor
LOSS_RTOL, GRAD_RTOL = 1e-3, 5e-3


def sizes(args):
    """["--n", "8", "--steps", "20"] -> {"n": 8, "steps": 20}."""
    return {k.lstrip("-"): int(v) for k, v in zip(args[::2], args[1::2])}


def run(name, args):
    work = MODULES[name].build(ti, **sizes(args))
    work.reset()
    work.fwd_bwd()
    return work.result()


REFERENCE = [pytest.param(name, size, id=name) for name, options in WORKLOADS.items()
             for size in options if size.reference]


@pytest.mark.parametrize("name,size", REFERENCE)
def test_fast_mode_reproduces_the_numbers_of_benchmarks_md(name, size):
    ti.init(mode="fast", default_fp=ti.f32, check="off")
    loss, grads = run(name, size.args)
    reference = dict(size.reference)
    assert float(loss) == pytest.approx(reference.pop("loss"), rel=LOSS_RTOL)
    for label, want in reference.items():
        assert float(grads[label]) == pytest.approx(want, rel=GRAD_RTOL), label


SMALL = {"gravity": ["--n", "8", "--steps", "5"],
         "mass_spring": ["--nx", "4", "--ny", "3", "--steps", "160"],   # touches the ground
         "wave": ["--n", "16", "--steps", "8"],
         "mpm": ["--n", "64", "--grid", "16", "--steps", "3"]}


@pytest.mark.parametrize("name", list(SMALL))
def test_interp_checker_accepts_the_workloads_and_fast_mode_agrees(name):
    ti.init(mode="interp", default_fp=ti.f32, check="error")   # a violation would raise
    loss, grads = run(name, SMALL[name])
    ti.init(mode="fast", default_fp=ti.f32, check="off")
    fast_loss, fast_grads = run(name, SMALL[name])
    assert any(float(g) != 0 for g in grads.values())
    assert float(fast_loss) == pytest.approx(float(loss), rel=1e-4)
    for label, value in grads.items():
        assert float(fast_grads[label]) == pytest.approx(float(value), rel=1e-3, abs=1e-9), label


@pytest.mark.parametrize("name", list(SMALL))
def test_checked_fast_mode_accepts_the_workloads_and_changes_no_number(name, capsys):
    """Fast mode's checks (on by default) accept the workloads, DiffTaichi's checkpointing in
    mpm included (its recomputed parallel atomics round differently), and leave the loss and
    gradients bit for bit what unchecked fast mode computes."""
    ti.init(mode="fast", default_fp=ti.f32, check="off")
    loss, grads = run(name, SMALL[name])
    ti.init(mode="fast", default_fp=ti.f32, check="error")     # a violation would raise
    checked_loss, checked_grads = run(name, SMALL[name])
    assert float(checked_loss) == float(loss)
    assert {k: float(v) for k, v in checked_grads.items()} == {k: float(v) for k, v in grads.items()}
    assert "unchecked" not in capsys.readouterr().err     # every in-launch hazard was settled


PEER_SYSTEMS = {"warp": "warp", "jax": "jax"}     # peer -> the module it needs


@pytest.mark.parametrize("peer", list(PEER_SYSTEMS))
@pytest.mark.parametrize("name", list(SMALL))
def test_peer_versions_compute_tinyads_loss_and_gradients(name, peer):
    """The Warp and JAX versions (benchmarks/peers/) are the same programs: at a small size they
    give fast mode's loss and gradients to f32 rounding (a different equation, constant or input
    would not)."""
    pytest.importorskip(PEER_SYSTEMS[peer])
    from benchmarks import peers  # noqa: PLC0415
    module = importlib.import_module(f"benchmarks.peers.{peer}_{name}")
    ti.init(mode="fast", default_fp=ti.f32, check="off")
    loss, grads = run(name, SMALL[name])
    lib, _ = peers.start(peer)
    work = module.build(lib, **sizes(SMALL[name]))
    work.reset()
    work.fwd_bwd()
    peer_loss, peer_grads = work.result()
    assert any(float(g) != 0 for g in grads.values())
    assert set(peer_grads) == set(grads)
    assert float(peer_loss) == pytest.approx(float(loss), rel=1e-4)
    for label, value in grads.items():
        assert float(peer_grads[label]) == pytest.approx(float(value), rel=1e-3, abs=1e-9), label


def test_python_m_benchmarks_runs_from_any_directory(tmp_path):
    """`python -m tinyad.benchmarks` (what `tinyad bench` runs) finds its package and its
    per-measurement subprocesses find the workload modules from outside the checkout (after a
    `pip install -e .` that predates the package, install again)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-m", "tinyad.benchmarks", "--quick", "--only",
                           "gravity", "--peers", "none", "--repeats", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("gravity")]
    modes = ("interp", "fast cold", "fast warm", "fast checked", "fast captured",
             "fast capt. chk")
    for mode, row in zip(modes, rows, strict=True):
        assert f" {mode} " in row and "error" not in row, proc.stdout


def test_the_gpu_check_runs_and_compares_with_the_cpu(tmp_path):
    """`tinyad bench --arch cuda` (benchmarks/gpu.py), the check prepared for a GPU: every
    row gets its "arch" and its difference from tinyad on the CPU. Without a GPU, tinyad's rows
    fall back to the CPU and say so, with the same values."""
    proc = subprocess.run([sys.executable, "-m", "tinyad.benchmarks", "--arch", "cuda", "--quick",
                           "--only", "gravity", "--peers", "none", "--repeats", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("gravity")]
    # fixed columns (benchmarks/gpu.py table): workload 12, size 25, system 15, arch 5
    assert [r[37:52].strip() for r in rows] == ["tinyad", "tinyad checked", "tinyad cpu"], \
        proc.stdout
    from tinyad import compile as fast_compile
    arch = "cuda" if fast_compile.cuda_available() else "cpu"
    for row in rows[:2]:
        assert row[52:57].strip() == arch, proc.stdout
        assert float(row.split()[-1]) < 1e-4, proc.stdout       # "vs cpu": the same numbers


def test_the_table_folds_its_rows_to_fit_an_80_column_terminal():
    """At 80 columns a row's measures go on a line of their own (the one-line table is 120
    columns and wrapped mid-number); in a file or a pipe, each row stays one line."""
    from benchmarks.__main__ import table

    result = {"import_s": 0.47, "compile_s": 9.4, "forward_s": 0.0022, "fwd_bwd_s": 0.0356,
              "loss": -407.084, "grads": {}}
    rows = [("gravity", "N=8, 100 steps", "fast warm", result, None),
            ("gravity", "N=8, 100 steps", "fast checked", {"error": "a long message " * 9}, None)]
    wide = table(rows, width=None).splitlines()
    assert len(wide) == 4 and len(wide[0]) >= 100
    narrow = table(rows, width=80).splitlines()
    assert max(map(len, narrow)) < 80
    assert narrow[3].startswith("gravity") and narrow[4].split() == \
        ["0.47", "9.40", "0.0022", "0.0356", "-407.084"]
    assert " ".join(narrow[6:]).split() == ["error:"] + ("a long message " * 9).split()
