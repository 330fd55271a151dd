"""Fast mode's `fast_math=True` (the default) computes each float operation as IEEE says, as
interp mode does: no fused multiply-add, no reassociation, no reciprocal for a division, no
sign of zero dropped (compile/pysource.py FAST_MATH, docs/fast-mode.md).

With LLVM's `contract`, `a * b + c` became one fused multiply-add, rounded once: a float `==`
or a sign test on such a value came out the other way than in interp mode and in Taichi 1.7.4
(biaxialFem99's `pos[i][1] == maxy` held no vertex at the top, docs/taichi-compat.md).
"""
import numpy as np
import pytest

import tinyad as ti


@pytest.mark.parametrize("dtype, bits", [(ti.f32, 13), (ti.f64, 30)])
def test_a_multiply_add_is_rounded_twice(mode, dtype, bits):
    """a = 1 + 2^-k, b = 1 - 2^-k: a * b = 1 - 2^-2k rounds to 1, so a * b - 1 is 0 in IEEE
    arithmetic, where a fused multiply-add gives -2^-2k."""
    n = 64
    a, b, c = (ti.field(dtype, n) for _ in range(3))
    equal, negative = ti.field(ti.i32, n), ti.field(ti.i32, n)

    @ti.kernel
    def compare():
        for i in range(n):
            if a[i] * b[i] + c[i] == 0.0:
                equal[i] = 1
            if a[i] * b[i] + c[i] < 0.0:
                negative[i] = 1

    np_type = np.float32 if dtype == ti.f32 else np.float64
    eps = np_type(2.0 ** -bits)
    a.from_numpy(np.full(n, 1 + eps, np_type))
    b.from_numpy(np.full(n, 1 - eps, np_type))
    c.from_numpy(np.full(n, -1, np_type))
    assert (1 + eps) * (1 - eps) - np_type(1) == 0          # numpy: each operation rounded
    compare()
    assert equal.to_numpy().tolist() == [1] * n
    assert negative.to_numpy().tolist() == [0] * n
