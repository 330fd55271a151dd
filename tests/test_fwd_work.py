"""benchmarks/fwd_work.py's counts of float ops and bytes, on kernels whose counts are known."""
import tinyad as ti
from benchmarks.fwd_work import count


def test_counts_ops_and_bytes_per_iteration(mode):
    x = ti.field(ti.f64, shape=4, needs_dual=True)
    y = ti.field(ti.f64, shape=4, needs_dual=True)

    @ti.kernel
    def k(n: ti.i32):
        for i in range(n):
            y[i] = x[i] * x[i] + 1.0          # x[i] loaded once; a mul and an add

    k(3)
    traced = next(iter(k._traces.values()))
    assert count(traced.ir, {"n": 3}) == (3 * 2, 3 * (8 + 8))
    # tangent: y.dual[i] = x[i] * x.dual[i] + x[i] * x.dual[i] (one product, merged), stored
    tangent_ops, tangent_bytes = count(traced.variant_ir("tangent"), {"n": 3})
    assert tangent_bytes == 3 * (8 + 8 + 8 + 8)
    assert 3 * 2 < tangent_ops <= 3 * 5
