"""Shared fixtures. Every feature test takes `mode`, so it runs in each mode that exists."""
import fnmatch
import os

import pytest

import tinyad as ti

# Both modes by default; TINYAD_TEST_MODES=interp (or =fast) runs one.
MODES = os.environ.get("TINYAD_TEST_MODES", "interp,fast").split(",")

# Fast mode compiles each kernel with numba, which costs about 1-2 ms per IR operation, and more
# for long kernels whose locals are reassigned in loops. These two tests' 3x3 SVD / polar
# adjoint kernels take 40 s and 5 minutes to compile on 2 cores. Interp mode runs them, fast
# mode runs the other SVD/polar gradient tests; TINYAD_SLOW_TESTS=1 runs these two as well.
FAST_MODE_COMPILE_TOO_SLOW = [
    "tests/test_linalg.py::test_gradient_through_polar_in_a_serial_loop[[]fast]",
    "tests/test_linalg.py::test_gradients_at_degenerate_matrices_are_finite[[]fast-3]",
]


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TINYAD_SLOW_TESTS"):
        return
    skip = pytest.mark.skip(reason="fast mode: numba compiles this test's kernels in minutes "
                                   "(TINYAD_SLOW_TESTS=1 runs it)")
    for item in items:
        if any(fnmatch.fnmatchcase(item.nodeid, p) for p in FAST_MODE_COMPILE_TOO_SLOW):
            item.add_marker(skip)


@pytest.fixture(params=MODES)
def mode(request):
    """Initialise tinyad in one execution mode (f64 by default for gradient checks)."""
    ti.init(mode=request.param, default_fp=ti.f64)
    return request.param


@pytest.fixture
def f32_mode(mode):
    """Like `mode`, but with Taichi's default f32 precision."""
    ti.init(mode=mode, default_fp=ti.f32)
    return mode
