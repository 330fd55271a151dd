"""The frontend: Python source of a `@ti.kernel` -> IR (tracer, exprs, loops, scope), and the
language the kernels are written in (lang, math, matrix, linalg)."""
