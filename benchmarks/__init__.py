"""Benchmarks: `python -m benchmarks` (see benchmarks/__main__.py)."""

# The name this package runs under: `tinyad.benchmarks` once installed (`tinyad bench`), or
# `benchmarks` from a checkout (`python -m benchmarks`). Measurements run as subprocesses
# `python -m {PACKAGE}.<workload>`, so they use the same copy of the code as their parent.
PACKAGE = __name__
