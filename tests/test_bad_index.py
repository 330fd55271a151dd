"""A bad index is an error at the user's line in both modes, and never memory outside the field.

Fast mode (without debug=True) guards the accesses whose indices the IR cannot bound (an index
read from a field, computed from a float, under a branch: tinyad/check/reached.py IndexProof):
the index is clamped into the field and the first bad one recorded in a flag the launcher reads
after the launch (compile/badindex.py). Before, fast mode read another array's memory, wrapped
-1 to the field's end, or ended the process with a segmentation fault (issue 38), where interp
mode reported the index.
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tinyad as ti
from tinyad.analysis.sites import access_sites
from tinyad.check.checkpoints import IndexChecks
from tinyad.check.reached import IndexProof

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("n", [8, 20000])      # a serial kernel, and one on the thread pool
def test_an_index_read_from_a_field(mode, n):
    x = ti.field(ti.f64, n)
    idx = ti.field(ti.i32, n)
    out = ti.field(ti.f64, n)

    @ti.kernel
    def gather():
        for i in range(n):
            out[i] = x[idx[i]]

    x.from_numpy(np.arange(n, dtype=np.float64))
    idx.from_numpy(np.arange(n)[::-1].astype(np.int32))
    gather()                          # the clean twin: in bounds, silent and right
    np.testing.assert_array_equal(out.to_numpy(), np.arange(n)[::-1])
    idx[n // 2] = -1                  # fast mode wrapped it to x[n - 1]
    with pytest.raises(ti.TinyadIndexError, match=r"index \(-1,\) is out of bounds for field "
                                                  r"x of shape \(%d,\)" % n) as error:
        gather()
    assert "out[i] = x[idx[i]]" in str(error.value)          # the user's line
    idx[n // 2] = n                   # one past the end: another array's memory
    with pytest.raises(ti.TinyadIndexError, match=r"index \(%d,\) is out of bounds" % n):
        gather()
    idx[n // 2] = 3                   # and the next launch is clean again
    gather()
    assert out[n // 2] == 3


NAN_SCRIPT = textwrap.dedent('''
    import json, sys
    import tinyad as ti

    ti.init(mode=sys.argv[1])
    n = 4
    x = ti.field(ti.f32, n)
    out = ti.field(ti.f32, n)

    @ti.kernel
    def lookup():
        for i in range(n):
            k = ti.cast(x[i] / x[i], ti.i32)    # 0/0: NaN, cast to an integer
            out[i] = x[k] + 1.0

    try:
        lookup()
        print(json.dumps({"raised": None}))
    except ti.TinyadIndexError as exc:
        print(json.dumps({"raised": str(exc)}))
''')


def test_an_index_computed_from_nan_is_reported_not_a_crash(mode, tmp_path):
    """0/0 cast to i32 ended the fast-mode process (exit 139, no Python error): in a fresh
    process, so that a crash fails this test instead of ending pytest."""
    script = tmp_path / "nan_index.py"
    script.write_text(NAN_SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, str(script), mode], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    raised = json.loads(proc.stdout.strip().splitlines()[-1])["raised"]
    assert raised is not None and "is out of bounds for field x of shape (4,)" in raised
    assert "out[i] = x[k] + 1.0" in raised


def test_an_index_read_from_an_integer_field_is_too_big_in_a_scatter(mode):
    """A scatter-add through an index field (an atomic in a parallel loop), one index too big."""
    n, m = 300, 1000
    target = ti.field(ti.f64, m)
    where = ti.field(ti.i32, n)

    @ti.kernel
    def scatter():
        for i in range(n):
            target[where[i]] += 1.0

    where.from_numpy((np.arange(n) * 3).astype(np.int32))
    scatter()
    assert target.to_numpy().sum() == n
    where[7] = m + 5
    with pytest.raises(ti.TinyadIndexError, match=r"index \(1005,\) is out of bounds for field "
                                                  r"target of shape \(1000,\)") as error:
        scatter()
    assert "target[where[i]] += 1.0" in str(error.value)


def test_a_scatter_into_per_thread_copies(mode):
    """mpm's particle-to-grid pattern: at this size fast mode adds into per-thread copies of
    the grid (summed after the loop), a path of its own that is guarded too."""
    n = 20000
    x = ti.field(ti.f32, n)
    grid = ti.field(ti.f32, (8, 8))

    @ti.kernel
    def scatter():
        for i in range(n):
            base = ti.cast(x[i] * 8, ti.i32)
            grid[base, 7 - base] += 1.0

    x.from_numpy(np.linspace(0, 0.99, n).astype(np.float32))
    scatter()
    assert grid.to_numpy().sum() == n
    x[5] = -0.5
    with pytest.raises(ti.TinyadIndexError, match=r"index \(-4, 11\) is out of bounds for "
                                                  r"field grid of shape \(8, 8\)"):
        scatter()


def test_a_prange_loop_is_guarded_too(mode, monkeypatch):
    """numba's parfors (prange) path, which kernels with a return value and stencil adjoints
    take, and TINYAD_PARFORS=1 forces: the guard is plain stores, so the loop stays parallel."""
    monkeypatch.setenv("TINYAD_PARFORS", "1")
    monkeypatch.setenv("TINYAD_PARALLEL_MIN", "0")
    n = 1000
    x = ti.field(ti.f64, n)
    idx = ti.field(ti.i32, n)
    out = ti.field(ti.f64, n)

    @ti.kernel
    def gather() -> ti.f64:
        for i in range(n):
            out[i] = x[idx[i]] * 2.0
        return out[0]

    x.from_numpy(np.arange(n, dtype=np.float64))
    idx.from_numpy(np.arange(n)[::-1].astype(np.int32))
    assert gather() == 2.0 * (n - 1)
    np.testing.assert_array_equal(out.to_numpy(), 2.0 * np.arange(n)[::-1])
    if mode == "fast":
        source = gather._traced_for_inspection()._programs["primal"].source
        assert "prange(" in source and "in_bounds1(" in source
    idx[500] = -3
    with pytest.raises(ti.TinyadIndexError, match=r"index \(-3,\)") as error:
        gather()
    assert "out[i] = x[idx[i]] * 2.0" in str(error.value)


def test_an_index_under_a_branch(mode):
    n = 6
    x = ti.field(ti.f64, n)
    out = ti.field(ti.f64, n)

    @ti.kernel
    def previous(offset: ti.i32):
        for i in range(n):
            if i % 2 == 1:
                out[i] = x[i - offset]

    x.from_numpy(np.arange(n, dtype=np.float64) * 10)
    previous(1)
    assert out.to_numpy().tolist() == [0, 0, 0, 20, 0, 40]
    with pytest.raises(ti.TinyadIndexError, match=r"index \(-1,\)"):
        previous(2)


def test_a_step_past_the_end_is_refused_with_the_checks_off(mode):
    """x[t + 1] launched with t = steps - 1: settled from the IR before each launch (no code
    in the kernel), with the rule checks off too."""
    ti.init(mode=mode, check="off")
    steps = 4
    x = ti.field(ti.f64, steps)

    @ti.kernel
    def advance(t: ti.i32):
        for i in range(1):
            x[t + 1] = x[t] + 1.0

    for t in range(steps - 1):
        advance(t)
    assert x.to_numpy().tolist() == [0, 1, 2, 3]
    with pytest.raises(ti.TinyadIndexError, match=r"index \(?4"):
        advance(steps - 1)


def test_a_gradient_through_an_index_field_is_unchanged(mode):
    """The guards change no value: d/dx of sum_i (i + 1) x[idx_i]^2 is 2 x_j times the weights
    gathered at j, in the adjoint's guarded scatter too."""
    n = 5
    x = ti.field(ti.f64, n, needs_grad=True)
    idx = ti.field(ti.i32, n)
    loss = ti.field(ti.f64, (), needs_grad=True)

    @ti.kernel
    def energy():
        for i in range(n):
            loss[None] += (i + 1) * x[idx[i]] ** 2

    values, targets = np.array([0.5, -1.0, 2.0, 0.25, 1.5]), np.array([4, 4, 0, 2, 1])
    x.from_numpy(values)
    idx.from_numpy(targets.astype(np.int32))
    with ti.ad.Tape(loss):
        energy()
    expected = np.zeros(n)
    for i, j in enumerate(targets):
        expected[j] += (i + 1) * 2 * values[j]
    np.testing.assert_allclose(x.grad.to_numpy(), expected)
    assert loss[None] == pytest.approx(sum((i + 1) * values[j] ** 2
                                           for i, j in enumerate(targets)))


def test_which_accesses_are_guarded():
    """Guards only where the IR cannot bound the index; the rest cost nothing (or a check
    before the launch)."""
    ti.init(mode="interp")
    n = 16
    x = ti.field(ti.f64, n)
    y = ti.field(ti.f64, (4, n))
    idx = ti.field(ti.i32, n)

    @ti.kernel
    def accesses(t: ti.i32):
        for i in range(n):
            a = x[i] + x[ti.min(i + 1, n - 1)] + x[(i + 3) % n]    # bounded: no code
            if i > 0:
                a += x[i - 1]                                     # -1 if the branch were not
            a += y[t, i]                                          # settled before the launch
            a += x[idx[i]]                                        # read from a field
            a += x[ti.cast(a, ti.i32)]                            # computed from a float
            x[i] = a

    kernel_ir = accesses._traced_for_inspection().ir
    proof = IndexProof(kernel_ir)
    sites = access_sites(kernel_ir)
    guarded = sorted({s.node.loc.line - sites[0].node.loc.line for s in sites
                      if id(s.indices) in proof.guarded})
    assert guarded == [2, 4, 5]
    assert [s.field.name for s in proof.launch_sites] == ["y"]


def _p2g_like(n, grid_n):
    """mpm's particle-to-grid pattern: a base cell computed from a float, then nine static
    offsets into two grids (in fast mode one range check of `base` stands for their guards,
    tinyad/check/checkpoints.py)."""
    x = ti.Vector.field(2, ti.f64, n, needs_grad=True)
    grid_v = ti.Vector.field(2, ti.f64, (grid_n, grid_n), needs_grad=True)
    grid_m = ti.field(ti.f64, (grid_n, grid_n), needs_grad=True)
    loss = ti.field(ti.f64, (), needs_grad=True)

    @ti.kernel
    def p2g():
        for p in range(n):
            base = ti.cast(x[p] * grid_n - 0.5, ti.i32)
            fx = x[p] * grid_n - ti.cast(base, ti.f64)
            for i in ti.static(range(3)):
                for j in ti.static(range(3)):
                    offset = ti.Vector([i, j])
                    weight = (1.0 + fx[0] * i) * (1.0 + fx[1] * j)
                    grid_v[base + offset] += weight * x[p]
                    grid_m[base + offset] += weight

    @ti.kernel
    def total():
        for i, j in grid_m:
            loss[None] += grid_m[i, j] + grid_v[i, j][0] * grid_v[i, j][1]

    return x, grid_m, loss, p2g, total


@pytest.mark.parametrize("n", [8, 20000])      # serial, and per-thread copies of the grids
def test_a_float_derived_base_plus_static_offsets(mode, n):
    """The bad base is reported at the access interp mode stops at, with its index, in the
    kernel and in its adjoint (which recomputes base and reads the grids' gradients)."""
    x, grid_m, loss, p2g, total = _p2g_like(n, 8)
    points = np.random.default_rng(1).uniform(0.1, 0.6, (n, 2))
    x.from_numpy(points)
    with ti.ad.Tape(loss):                       # the clean twin: silent, and right
        p2g()
        total()
    fx = points * 8 - np.floor(points * 8 - 0.5)            # (sum_i 1 + i fx = 3 + 3 fx)
    assert grid_m.to_numpy().sum() == pytest.approx(np.sum(9 * (1 + fx[:, 0]) * (1 + fx[:, 1])))
    grid_m.fill(0)
    x[n // 2] = [-0.1, 0.5]                      # base (-1, 3): its first access is at (-1, 3)
    with pytest.raises(ti.TinyadIndexError, match=r"index \(-1, 3\) \(component \(0,\)\) is out "
                                                  r"of bounds for field grid_v of shape \(8, 8\)"
                       ) as error:
        p2g()
    assert "grid_v[base + offset] += weight * x[p]" in str(error.value)
    if mode == "fast":                           # one check, no guard at the accesses
        source = p2g._traced_for_inspection()._programs["primal"].source
        assert source.count("record2(") == 1 and "in_bounds" not in source
    x[n // 2] = [0.5, 0.85]                      # base (3, 6): (3, 8) is one past the end
    with pytest.raises(ti.TinyadIndexError,
                       match=r"index \(3, 8\) \(component \(0,\)\) is out of bounds") as error:
        p2g()
    assert "grid_v[base + offset] += weight * x[p]" in str(error.value)
    x[n // 2] = [0.3, 0.3]
    p2g()                                        # and the next launch is clean again


def test_a_float_derived_base_in_the_adjoint(mode):
    """The adjoint recomputes base and reads the grids' gradients at base + offset, covered
    the same way; it runs the offsets backwards, so grid_m's access at offset (2, 0) is the
    first out of bounds. (Rule checks off: they would refuse the changed x first.)"""
    ti.init(mode=mode, check="off")
    n = 8
    x, grid_m, _, p2g, _ = _p2g_like(n, 8)
    x.from_numpy(np.full((n, 2), 0.3))
    p2g()
    x[n // 2] = [0.5, -0.1]                      # base (3, -1)
    grid_m.grad.fill(1.0)
    with pytest.raises(ti.TinyadIndexError,
                       match=r"index \(5, -1\) is out of bounds for field grid_m") as error:
        p2g.grad()
    assert "grid_m[base + offset] += weight" in str(error.value)


def test_one_range_check_stands_for_the_offset_guards():
    """The accesses `base + offset` are covered by one checkpoint of base, whose range is
    each access's in-bounds range intersected (offsets 0..2 into 8 cells: 0..5)."""
    ti.init(mode="interp")
    *_, p2g, _ = _p2g_like(8, 8)
    proof = IndexChecks(p2g._traced_for_inspection().ir)
    assert proof.guarded == frozenset()
    [checkpoint] = proof.checkpoints
    assert checkpoint.names == ("base_0", "base_1") and checkpoint.ranges == ((0, 5), (0, 5))
    assert len(checkpoint.uses) == 9 * 3         # grid_v's two components, grid_m


def test_an_access_under_the_users_own_bounds_test_is_not_covered(mode):
    """A checkpoint covers only accesses that run whenever it does: one under the program's
    own test of the index keeps its guard, and an out-of-range base it never uses is no
    error (a check where base is assigned would report it)."""
    n, m = 6, 4
    x = ti.field(ti.f64, n)
    grid = ti.field(ti.f64, m + 1)
    out = ti.field(ti.f64, n)

    @ti.kernel
    def lookup():
        for i in range(n):
            base = ti.cast(x[i], ti.i32)
            if base < m:
                out[i] = grid[base] + grid[base + 1]

    grid.from_numpy(np.arange(m + 1, dtype=np.float64))
    x.from_numpy(np.array([0.5, 1.5, 9.5, 3.2, 100.0, 2.0]))
    lookup()
    assert out.to_numpy().tolist() == [1, 3, 0, 7, 0, 5]
    proof = IndexChecks(lookup._traced_for_inspection().ir)
    assert proof.checkpoints == [] and len(proof.guarded) == 2
    x[0] = -1.5
    with pytest.raises(ti.TinyadIndexError, match=r"index \(-1,\)"):
        lookup()
