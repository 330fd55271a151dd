"""Shared fixtures. Every feature test takes `mode`, so it runs in each mode that exists."""
import pytest

import tinyad as ti

# Fast mode (numba) is not built yet (issue 5); add "fast" here when it is.
MODES = ["interp"]


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
