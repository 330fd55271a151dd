"""NaN and infinity as Taichi 1.7.4 treats them, in both modes.

The expected values are Taichi 1.7.4's, measured by running the same kernel under it
(`arch=ti.cpu`, f32): `ti.max`/`ti.min` (and Python's max/min in a kernel) drop a NaN operand,
as C's fmax/fmin do; every comparison with a NaN is false, `!=` too (LLVM's ordered compares);
`ti.select` takes the branch its condition says; a cast of NaN or an out-of-range float to i32
is INT_MIN. The adjoints of max/min give the gradient to the operand the comparison picks,
as Taichi's do. One difference stays, on purpose: under Taichi's default fast math, `x == x`
is folded to true even for a NaN; tinyad answers false, as Taichi does with fast_math=False.
"""
import math

import numpy as np

import tinyad as ti

NAN, INF = float("nan"), float("inf")
A = [NAN, 1.0, NAN, INF, -INF, 3e9]
B = [1.0, NAN, NAN, 1.0, 1.0, 1.0]
INT_MIN = -2 ** 31
# Taichi 1.7.4's results, row by row (None: NaN)
TAICHI = {
    "ti.max": [1.0, 1.0, None, INF, 1.0, 3e9],
    "ti.min": [1.0, 1.0, None, 1.0, -INF, 1.0],
    "max": [1.0, 1.0, None, INF, 1.0, 3e9],
    "min": [1.0, 1.0, None, 1.0, -INF, 1.0],
    "select(a > b, a, b)": [1.0, None, None, INF, 1.0, 3e9],
    "a < b": [0, 0, 0, 0, 1, 0],
    "a != a": [0, 0, 0, 0, 0, 0],
    "a == a": [0, 1, 0, 1, 1, 1],           # (fast_math=False; fast math folds it to 1)
    "i32(a)": [INT_MIN, 1, INT_MIN, INT_MIN, INT_MIN, INT_MIN],
    "i32(floor(a))": [INT_MIN, 1, INT_MIN, INT_MIN, INT_MIN, INT_MIN],
    "a.grad": [0.0, 0.0, 0.0, 1.0, 2.0, 1.0],
    "b.grad": [3.0, 3.0, 3.0, 2.0, 1.0, 2.0],
}


def _nan_as_none(values):
    return [None if isinstance(v, float) and math.isnan(v) else v for v in values]


def test_nan_and_inf_as_taichi(f32_mode):
    n = len(A)
    a = ti.field(ti.f32, n, needs_grad=True)
    b = ti.field(ti.f32, n, needs_grad=True)
    out = ti.field(ti.f32, (8, n))
    ints = ti.field(ti.i32, (2, n))
    loss = ti.field(ti.f32, (), needs_grad=True)

    @ti.kernel
    def probe():
        for i in range(n):
            out[0, i] = ti.max(a[i], b[i])
            out[1, i] = ti.min(a[i], b[i])
            out[2, i] = max(a[i], b[i])
            out[3, i] = min(a[i], b[i])
            out[4, i] = ti.select(a[i] > b[i], a[i], b[i])
            out[5, i] = ti.select(a[i] < b[i], 1.0, 0.0)
            out[6, i] = ti.select(a[i] != a[i], 1.0, 0.0)
            out[7, i] = ti.select(a[i] == a[i], 1.0, 0.0)
            ints[0, i] = ti.cast(a[i], ti.i32)
            ints[1, i] = ti.cast(ti.floor(a[i]), ti.i32)

    @ti.kernel
    def total():
        for i in range(n):
            loss[None] += ti.max(a[i], b[i]) + 2 * ti.min(a[i], b[i])

    a.from_numpy(np.array(A, np.float32))
    b.from_numpy(np.array(B, np.float32))
    probe()
    with ti.ad.Tape(loss):
        total()
    got = dict(zip(list(TAICHI)[:8], (_nan_as_none(r) for r in out.to_numpy().astype(float)
                                      .tolist())))
    got["i32(a)"], got["i32(floor(a))"] = ints.to_numpy().tolist()
    got["a.grad"] = a.grad.to_numpy().astype(float).tolist()
    got["b.grad"] = b.grad.to_numpy().astype(float).tolist()
    for key, want in TAICHI.items():
        assert got[key] == want, (key, got[key])


def test_a_clamped_nan_index_stays_in_bounds(f32_mode):
    """A raycaster clamps an index computed from 0/0: Taichi's min/max drop the NaN and give
    the last valid index; keeping the NaN made tinyad index with INT_MIN."""
    n = 8
    samples = ti.field(ti.f32, n)
    hit = ti.field(ti.f32, ())
    depth = ti.field(ti.f32, ())

    @ti.kernel
    def march():
        t = depth[None] / depth[None]                      # 0/0: NaN
        k = ti.cast(ti.max(ti.min(t * n, n - 1), 0), ti.i32)
        hit[None] = samples[k]

    samples.from_numpy(np.arange(n, dtype=np.float32))
    march()
    assert hit[None] == n - 1
