"""The IR core: types, source locations, errors, the IR nodes, the op table, the IR builder, the
printer, the well-formedness check and IR analyses. It imports nothing else of tinyad: every other
layer stands on it."""
