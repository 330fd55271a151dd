"""Fast mode: numba code generation from tinyad IR (CPU and CUDA). Not built yet (issue 5)."""
