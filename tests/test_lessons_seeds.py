"""Lessons 11 onwards (checkpointing, forward mode, derivatives of funcs, forward-first
building, control flow on a counter) run start to finish in each mode, as `tinyad lesson N
--no-pause` does, and their numbers agree with an independent truth (numpy, a formula, sympy)
computed here, not taken from the lesson."""
import io
import math

import numpy as np
import pytest

from tinyad import lessons


def run_lesson(key, mode, monkeypatch):
    monkeypatch.setenv("TINYAD_MODE", mode)
    out = io.StringIO()
    namespace = lessons.run(key, pause=False, out=out)
    return namespace, out.getvalue()


def _central_difference(f, x0, h=1e-6):
    return np.array([(f(x0 + h * e) - f(x0 - h * e)) / (2 * h) for e in np.eye(len(x0))])


def test_checkpointing(mode, monkeypatch):
    ns, out = run_lesson("checkpointing", mode, monkeypatch)
    steps, dt = 6, 0.1
    start = 0.5 + 0.25 * np.arange(4)

    def loss(x0):
        xs = x0.copy()
        for _ in range(steps):
            xs = xs * (1 + dt * np.sin(xs))
        return (xs ** 2).sum()

    truth = _central_difference(loss, start)
    silent = np.array([float(v) for v in
                       out.split("x.grad[0, :] = [")[1].split("]")[0].split()])
    assert not np.allclose(silent, truth, atol=1e-2)          # the overwritten scratch
    assert "Global Data Access Rule 2: force[0]" in out
    assert np.allclose(ns["checkpointed_grad"], truth, rtol=1e-6)   # the checkpointed one
    assert "all 28 elements agree with sympy" in out
    assert "4 of 28 elements disagree with sympy" in out      # the forgetful checkpoint
