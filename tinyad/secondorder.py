"""`ti.ad.hvp` and `ti.ad.jacobian`: derivatives of a whole program (`run()` launches kernels)
built from the two modes, for small parameter sets.

A Hessian-vector product is forward mode over reverse mode: inside a FwdMode seeded with v on
param.dual, a Tape's adjoint kernels run their tangent variants (tinyad/kernel.py
"adjoint_tangent"), so d(param.grad)/d(param) . v lands in param.grad.dual. The tangent
launches log no field accesses, so in a run that checks the autodiff rules (interp mode), a
plain Tape pass runs first: a program whose gradient breaks a rule is refused, not given a
Hessian built on it. Every pass starts from the fields as they were when the helper was called.
"""
from __future__ import annotations

import numpy as np

from tinyad.ad import FwdMode, Tape
from tinyad.backend import NO_CHECKS
from tinyad.core.errors import TinyadRuntimeError
from tinyad.field import Field
from tinyad.ndarray import state_fields
from tinyad.runtime import runtime


def _snapshot():
    return [(f, f.to_numpy()) for f in state_fields()]


def _restore(snapshot):
    for f, values in snapshot:
        f.from_numpy(values)


def _require(fld, what, needs):
    if not isinstance(fld, Field):
        raise TinyadRuntimeError(f"ti.ad.{what} takes fields, got {type(fld).__name__}")
    missing = [n for n in needs if getattr(fld, n.split("_")[1]) is None]
    if missing:
        raise TinyadRuntimeError(f"ti.ad.{what}: {fld.name} needs " + " and ".join(
            f"{n}=True" for n in missing), hint=f"declare {fld.name} with " + ", ".join(
            f"{n}=True" for n in missing))


def hvp(run, loss, param, v) -> np.ndarray:
    """H v for the Hessian of the scalar field `loss` w.r.t. `param`; v is shaped like param
    (components included). param needs needs_grad=True and needs_dual=True, as does every
    field between it and the loss."""
    _require(param, "hvp", ("needs_grad", "needs_dual"))
    seed = np.asarray(v, dtype=np.float64).ravel()
    start = _snapshot()
    if runtime.backend.checks is not NO_CHECKS:   # the rule checks of the plain gradient
        with Tape(loss):
            run()
        _restore(start)
    with FwdMode(loss=param.grad, param=param, seed=list(seed)):
        with Tape(loss):
            run()
    return param.grad.dual.to_numpy()


def jacobian(run, output, param) -> np.ndarray:
    """d output / d param, one forward-mode sweep per element of param, each from the fields
    as they were at the call: an array of shape output.shape + element shape + the same of
    param. Both need needs_dual=True, as does every field between them."""
    _require(param, "jacobian", ("needs_dual",))
    _require(output, "jacobian", ("needs_dual",))
    size = param.dual.to_numpy().size
    start = _snapshot()
    columns = []
    for k in range(size):
        _restore(start)
        seed = np.zeros(size)
        seed[k] = 1.0
        with FwdMode(loss=output, param=param, seed=list(seed)):
            run()
        columns.append(output.dual.to_numpy().astype(np.float64))
    out_shape = columns[0].shape
    param_shape = param.dual.to_numpy().shape
    return np.stack(columns, axis=-1).reshape(out_shape + param_shape)
