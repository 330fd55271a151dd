"""The IR core, what a reader starts with: types, source locations, errors, the IR nodes, the op
table, the IR builder, the printer and the well-formedness check. It imports nothing else of
tinyad, raises or returns and never prints; every other layer stands on it. Its one import circle
is builder <-> ops (tests/test_layers.py CIRCLES)."""
