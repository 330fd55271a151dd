"""CUDA fast mode's field storage: a device copy of each field that kernels use, mirrored lazily
with the field's host array (the `FieldStorage` of tinyad/backend.py).

A field gets its device copy at its first launch, and then stays on the device: a kernel's
writes are brought back only when Python scope reads the field, and the host's values are sent
again only after Python scope wrote them. Filling a field that lives on the device (the Tape
clearing gradients, seeding the loss) happens on the device, so a steady-state Tape moves no
field data. Assigning a whole array (`from_numpy`) does not bring back the values it overwrites.

`stats` counts whole-field transfers in each direction.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
from numba import cuda

from tinyad.backend import FieldStorage
from tinyad.compile.cuda import grid


@dataclass
class _Copy:
    device: object                # the numba device array (a 0-d field: one element)
    host_current: bool = True     # False: a kernel changed the device copy since
    device_current: bool = True   # False: the host array was written since


@cuda.jit
def _fill(flat, value):
    """Every element of a 1-d device array := value (grid-stride)."""
    i = cuda.grid(1)
    while i < flat.size:
        flat[i] = value
        i += cuda.gridsize(1)


@dataclass
class _DeviceValues:
    """A snapshot of a field taken on the device (the host's copy was stale)."""
    array: object


def _as_1d(array: np.ndarray) -> np.ndarray:
    return array.reshape(1) if array.ndim == 0 else array


class DeviceMirror(FieldStorage):
    """Host arrays (the fields' own) plus device copies that kernels use (one mirror per
    ti.init: a new init forgets the device copies)."""

    def __init__(self):
        self._copies: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.stats = {"to_device": 0, "to_host": 0}

    # ---- for the CUDA launcher (compile/cuda.py) ----------------------------------------------
    def device_array(self, field):
        """The field's device copy, sent (again) if the host's values changed since."""
        copy = self._copies.get(field)
        if copy is None:
            self._copies[field] = copy = _Copy(cuda.to_device(_as_1d(field.host_array)))
            self.stats["to_device"] += 1
        elif not copy.device_current:
            copy.device.copy_to_device(_as_1d(field.host_array))
            copy.device_current = True
            self.stats["to_device"] += 1
        return copy.device

    def kernel_wrote(self, field) -> None:
        """A kernel changed the device copy: the host array is stale."""
        self._copies[field].host_current = False

    # ---- FieldStorage ---------------------------------------------------------------------------
    def to_host(self, field) -> np.ndarray:
        copy = self._copies.get(field)
        if copy is not None and not copy.host_current:
            copy.device.copy_to_host(_as_1d(field.host_array))
            copy.host_current = True
            self.stats["to_host"] += 1
        return field.host_array

    def invalidate(self, field) -> None:
        copy = self._copies.get(field)
        if copy is not None:
            copy.device_current = False

    def fill(self, field, value) -> None:
        copy = self._copies.get(field)
        if copy is None or np.ndim(value) != 0:
            self.assign(field, value)     # not on the device yet, or a vector value: host
            return
        flat = copy.device.reshape(copy.device.size)
        _fill[grid(flat.size)](flat, field.dtype.np(value))
        copy.host_current, copy.device_current = False, True

    def snapshot(self, field):
        copy = self._copies.get(field)
        if copy is None or copy.host_current:
            return field.host_array.copy()
        saved = cuda.device_array_like(copy.device)    # the values are on the device: copy there
        saved.copy_to_device(copy.device)
        return _DeviceValues(saved)

    def restore(self, field, snapshot) -> None:
        if not isinstance(snapshot, _DeviceValues):
            self.assign(field, snapshot)
            return
        copy = self._copies[field]
        copy.device.copy_to_device(snapshot.array)
        copy.host_current, copy.device_current = False, True

    def assign(self, field, array) -> None:
        field.host_array[...] = array
        copy = self._copies.get(field)
        if copy is not None:     # the host has every value now: nothing to bring back
            copy.host_current, copy.device_current = True, False
