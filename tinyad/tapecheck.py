"""`ti.ad.Tape(loss, grad_check=[fields])`: Taichi's finite-difference gradient check.

Why keep Taichi's exact recipe (python/taichi/ad/_ad.py, GradChecker) rather than the sharper
`ti.ad.verify`: programs written for Taichi use it and read its output. For each field x to
check, with a random direction t: for eps in 2**-3, 2**-5, ..., 2**-29, restore every field to
its state when the Tape was entered, set x += eps*t, replay the recorded launches, read the
loss; the same with -eps; the central difference of the loss is compared with the autodiff
directional derivative <x.grad, t>. The field passes at the first eps within 1 % relative
error. Each field prints "variable i passes grad check" or its smallest relative error; then an
AssertionError if any failed. Afterwards every field is restored and the launches replayed once
more, so the fields hold the forward results again (the .grad fields are untouched).

Differences from Taichi: the direction is drawn once per field (np.random.rand, so
np.random.seed makes it repeatable) rather than once per eps, and for vector/matrix fields it
has a component per entry rather than one shared by an element's entries.
"""
from __future__ import annotations

import numpy as np

from tinyad.core import types as T
from tinyad.core.errors import TinyadRuntimeError, TinyadTypeError
from tinyad.field import Field
from tinyad.ndarray import state_fields

EPS_RANGE = 2.0 ** np.arange(-3, -30, -2).astype(np.float64)


class GradChecker:
    """Made when a Tape with grad_check is entered (it saves every field then); `check` runs
    after the Tape's gradients are computed."""

    def __init__(self, loss, to_check):
        if loss is None:
            raise TinyadRuntimeError("Tape(grad_check=...) needs a loss")
        if loss.dtype != T.f64:
            raise TinyadTypeError("Only f64 is supported when checking grad.",
                                  hint=f"declare the loss {loss.name} as ti.f64 "
                                       "(e.g. ti.init(default_fp=ti.f64))")
        if isinstance(to_check, Field) or not isinstance(to_check, (list, tuple)):
            raise TinyadTypeError("grad_check should be a list of fields that need to check "
                                  "gradients.")
        for x in to_check:
            if not isinstance(x, Field) or not x.has_grad:
                raise TinyadTypeError(f"grad_check: {getattr(x, 'name', x)!r} is not a field "
                                      "with needs_grad=True")
        self.loss = loss
        self.to_check = list(to_check)
        self.fields = state_fields()
        self.backups = [f.to_numpy() for f in self.fields]
        self.result: list[bool] = []

    def restore(self):
        for f, saved in zip(self.fields, self.backups):
            f.from_numpy(saved)

    def replay(self, calls):
        for func, args, kwargs in calls:
            func(*args, **kwargs)

    def loss_after(self, calls, x, step):
        """Restore, x += step (in f64, stored in x's dtype), replay, read the loss."""
        self.restore()
        x.from_numpy((x.data.astype(np.float64) + step).astype(x.dtype.np))
        self.replay(calls)
        return float(self.loss.data[()])

    def check(self, calls):
        self.result = []
        try:
            for i, x in enumerate(self.to_check):
                if x is self.loss:
                    self.result.append(True)
                    continue
                tangent = np.random.rand(*x.data.shape)
                ip_autodiff = float(np.sum(x.grad.data.astype(np.float64) * tangent))
                relative_errors = []
                passed = False
                for eps in EPS_RANGE:
                    loss_pos = self.loss_after(calls, x, eps * tangent)
                    loss_neg = self.loss_after(calls, x, -eps * tangent)
                    ip_numerical = (loss_pos - loss_neg) * 0.5 / eps
                    err = abs(ip_autodiff - ip_numerical)
                    denominator = abs(ip_autodiff) + (0 if ip_numerical != 0 else 1e-20)
                    relative_errors.append(err / denominator if denominator else np.inf)
                    if err * 100 <= abs(ip_autodiff):
                        passed = True
                        break
                self.result.append(passed)
                if passed:
                    print("variable", i, "passes grad check")
                else:
                    print("variable", i, "has relative error", min(relative_errors),
                          f"(the smallest over {len(relative_errors)} steps)")
        finally:
            self.restore()
            self.replay(calls)
        assert all(self.result), "Not all variables pass grad check"
