"""Small dense linear algebra on Matrix values, unrolled at trace time (so differentiable)."""
from __future__ import annotations

from tinyad.errors import TinyadTypeError
from tinyad import build as B
from tinyad.matrix import Matrix


def determinant(a: Matrix):
    if a.ndim != 2 or a.n != a.m:
        raise TinyadTypeError(f"determinant needs a square matrix, got {a.shape}", B.current_loc())
    if a.n == 1:
        return a[0, 0]
    if a.n == 2:
        return a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0]
    if a.n == 3:
        return (a[0, 0] * (a[1, 1] * a[2, 2] - a[1, 2] * a[2, 1])
                - a[0, 1] * (a[1, 0] * a[2, 2] - a[1, 2] * a[2, 0])
                + a[0, 2] * (a[1, 0] * a[2, 1] - a[1, 1] * a[2, 0]))
    total = 0
    for j in range(a.n):  # Laplace expansion along the first row
        minor = Matrix([[a[i, k] for k in range(a.n) if k != j] for i in range(1, a.n)])
        term = a[0, j] * determinant(minor)
        total = total + term if j % 2 == 0 else total - term
    return total


def inverse(a: Matrix) -> Matrix:
    if a.ndim != 2 or a.n != a.m or a.n not in (1, 2, 3):
        raise TinyadTypeError(f"inverse is implemented for 1x1, 2x2 and 3x3 matrices, got "
                              f"{a.shape}", B.current_loc())
    inv_det = 1.0 / determinant(a)
    if a.n == 1:
        return Matrix([[inv_det]])
    if a.n == 2:
        return Matrix([[a[1, 1] * inv_det, -a[0, 1] * inv_det],
                       [-a[1, 0] * inv_det, a[0, 0] * inv_det]])
    cof = [[None] * 3 for _ in range(3)]
    for i in range(3):
        for j in range(3):
            r = [k for k in range(3) if k != i]
            c = [k for k in range(3) if k != j]
            minor = a[r[0], c[0]] * a[r[1], c[1]] - a[r[0], c[1]] * a[r[1], c[0]]
            cof[j][i] = minor * inv_det if (i + j) % 2 == 0 else -minor * inv_det
    return Matrix(cof)
