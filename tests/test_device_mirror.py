"""CUDA fast mode keeps fields on the device (compile/devicemirror.py): a Tape moves no field
data once the fields are there. Run by numba's CUDA simulator in a fresh process (the simulator
must be chosen before numba is imported), which counts every host<->device copy by wrapping the
simulator's own transfer functions, not tinyad's bookkeeping."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.cuda_simulator import simulator_program

SCRIPT = simulator_program('''
    from numba.cuda.simulator.cudadrv import devicearray as simulated
    import numpy as np
    import tinyad as ti

    copies = []      # the direction of every copy of a float array (int32 ones: launch flags)

    def counted(direction, transfer, dtype_of):
        def wrapper(*args, **kwargs):
            dtype = dtype_of(*args)
            if dtype is not None and np.dtype(dtype).kind == "f":
                copies.append(direction)
            return transfer(*args, **kwargs)
        return wrapper

    def host_dtype(self, ary, *rest):
        # a device-to-device copy (a Tape's undo snapshot) moves nothing between host and device
        return ary.dtype if isinstance(ary, np.ndarray) else None

    cuda.to_device = counted("up", cuda.to_device, lambda ary, *rest: ary.dtype)
    array = simulated.FakeCUDAArray
    array.copy_to_device = counted("up", array.copy_to_device, host_dtype)
    array.copy_to_host = counted("down", array.copy_to_host, lambda self, *rest: self.dtype)

    ti.init(mode="fast", arch=ti.cuda, check=os.environ["CHECK"])
    n = 8
    x = ti.field(ti.f32, shape=n, needs_grad=True)
    y = ti.field(ti.f32, shape=n, needs_grad=True)
    loss = ti.field(ti.f32, shape=(), needs_grad=True)

    @ti.kernel
    def square():
        for i in x:
            y[i] = x[i] * x[i]

    @ti.kernel
    def total():
        for i in y:
            loss[None] += ti.sin(y[i])

    x.from_numpy(np.linspace(0.1, 0.8, n).astype(np.float32))
    per_tape = []
    for _ in range(3):
        start = len(copies)
        with ti.ad.Tape(loss=loss):    # clears the gradients, seeds loss.grad = 1
            square()
            total()
        made = copies[start:]
        per_tape.append({"up": made.count("up"), "down": made.count("down")})
    start = len(copies)
    out = {"per_tape": per_tape, "grad": x.grad.to_numpy().tolist(), "loss": loss[None],
           "x": x.to_numpy().tolist()}
    out["reads"] = {"up": copies[start:].count("up"), "down": copies[start:].count("down")}
    out["backend"] = type(ti.runtime.runtime.backend.storage).__name__
    print(json.dumps(out))
''')


@pytest.mark.parametrize("check", ["off", "error"])
def test_a_steady_state_tape_of_cuda_kernels_copies_no_field(tmp_path, check):
    """The mirror moves nothing in a steady state. The rule checks (on by default) read what
    they compare back from the device: those copies are theirs, so the transfer counts are
    asserted with checks off, and the values with both."""
    script = tmp_path / "program.py"
    script.write_text(SCRIPT)
    # no PYTHONPATH: the installed package alone must do (generated code imports through it)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", CHECK=check,
               TINYAD_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(out["skip"])
    assert out["backend"] == "DeviceMirror"
    x = np.asarray(out["x"], np.float64)
    np.testing.assert_allclose(out["grad"], 2 * x * np.cos(x * x), rtol=1e-5)
    np.testing.assert_allclose(out["loss"], np.sin(x * x).sum(), rtol=1e-5)
    if check != "off":
        return
    warm_up, *steady = out["per_tape"]
    # the first Tape sends each of the 6 fields once; building and compiling the adjoints
    # reads no field back, and nothing else moves
    assert warm_up == {"up": 6, "down": 0}
    assert steady == [{"up": 0, "down": 0}] * 2
    # reading the results brings back x.grad and loss (x was never changed on the device)
    assert out["reads"] == {"up": 0, "down": 2}
