"""`ti.ndarray`: arrays passed to kernels as arguments, and numpy arrays passed the same way.

An Ndarray is a field that no SNode tree owns: the same storage, gradient twin and Python-scope
access (`a[i]`, `.fill`, `.to_numpy`, `.from_numpy`, `.grad`), made by `ti.ndarray(dtype,
shape, needs_grad)` and given to kernels through `ti.types.ndarray()` parameters. A numpy array
passed for such a parameter is wrapped in an Ndarray whose storage is the array itself, so the
kernel's writes land in it, as in Taichi.

At a launch, each ndarray parameter is an ArrayParam in the IR (tinyad/arrayparams.py), bound
to the array passed; `trace_signature` is what a trace is specialised on.
"""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from tinyad.allocation import normalize_shape
from tinyad.arrayparams import ArrayParam
from tinyad.core import types as T
from tinyad.core.errors import TinyadRuntimeError, TinyadTypeError
from tinyad.field import Field
from tinyad.frontend import lang
from tinyad.frontend.matrix import Matrix, Vector
from tinyad.runtime import runtime
from tinyad.varnames import caller_variable_name


class Ndarray(Field):
    """One ndarray: `shape` is its array shape; vector and matrix elements trail it."""

    is_ndarray = True

    def __init__(self, dtype, shape, element_shape=(), name=None, needs_grad=False,
                 array: np.ndarray | None = None):
        dtype = T.resolve_dtype(dtype)
        if needs_grad and not dtype.is_float:
            raise TinyadRuntimeError(f"{dtype} is not supported for ndarray with "
                                     "needs_grad=True: only float ndarrays have gradients")
        # role "ndarray" for the moment: Field registers primal fields with ti.root, which
        # owns no ndarray (lazy_grad and clear_all_gradients leave them alone, as in Taichi)
        super().__init__(dtype, None, element_shape, name or "ndarray", role="ndarray")
        self.role = "primal"
        if needs_grad:
            self.grad = self._twin("grad")
        self._place(normalize_shape(shape))
        # what a trace depends on (fixed once made): asked at every launch
        self.signature = (str(dtype), self.element_shape, self._shape, self.grad is not None)
        _live[next(_made)] = self
        self.external = array is not None   # a numpy array passed to a kernel: its memory
        self.copy_back_to = None            # or the array in Fortran order it is a copy of
        if array is not None:
            self.host_array = array

    def __repr__(self):
        kind = f"{'x'.join(map(str, self.element_shape))} " if self.element_shape else ""
        return f"<tinyad ndarray {self.name}: {kind}{self.dtype} {self._shape}>"


_made = itertools.count()
_live: weakref.WeakValueDictionary = weakref.WeakValueDictionary()   # creation number -> it


def state_fields() -> list:
    """The program's state: every placed field and every ndarray still in use, in the order
    made, since the last ti.init (which discards older ones). What the gradient checks save
    and restore between their runs."""
    return ([f for f in runtime.fields if f.is_placed]
            + [a for _, a in sorted(_live.items(), key=lambda item: item[0])
               if a.generation == runtime.generation])


def ndarray(dtype, shape, needs_grad=False, name=None) -> Ndarray:
    """`ti.ndarray(dtype, shape, needs_grad=False)`: dtype a scalar type or ti.types.vector /
    ti.types.matrix (ti.math.vec3, ...)."""
    scalar, element_shape = _element_type(dtype)
    return Ndarray(scalar, shape, element_shape, name or caller_variable_name(), needs_grad)


def vector_ndarray(n, dtype, shape, needs_grad=False) -> Ndarray:
    """`ti.Vector.ndarray(3, ti.f32, shape)`: an ndarray of n-vectors."""
    return ndarray(lang.VectorType(n, dtype), shape, needs_grad, caller_variable_name())


def matrix_ndarray(n, m, dtype, shape, needs_grad=False) -> Ndarray:
    """`ti.Matrix.ndarray(2, 3, ti.f32, shape)`: an ndarray of n x m matrices."""
    return ndarray(lang.MatrixType(n, m, dtype), shape, needs_grad, caller_variable_name())


Matrix.ndarray, Vector.ndarray = staticmethod(matrix_ndarray), staticmethod(vector_ndarray)


def _element_type(dtype):
    if isinstance(dtype, (lang.VectorType, lang.MatrixType)):
        return (dtype.dtype if dtype.dtype is not None else T.typing_defaults().fp), dtype.shape
    return dtype, ()


# ---- kernel arguments ---------------------------------------------------------------------------

# id of a numpy array passed to a kernel -> weak references to it and its Ndarray, so that the
# launches with one array see one Ndarray while it is in use (the rule checker keys its memory on
# it). Weak both ways: the Ndarray holds the array, and neither outlives the user's use of them.
_wrapped: dict[int, tuple] = {}


def as_argument(value, annotation: lang.NdarrayType, kernel: str, param: str) -> Ndarray:
    """The Ndarray a `ti.types.ndarray()` parameter gets for `value`, checked against the
    annotation's dtype and ndim."""
    where = f"{kernel}(): argument '{param}'"
    if isinstance(value, np.ndarray):
        value = _wrap_numpy(value, annotation, where)
    elif not isinstance(value, Ndarray):
        what = "a field" if isinstance(value, Field) else type(value).__name__
        raise TinyadTypeError(f"{where} is a ti.types.ndarray(), got {what}",
                              hint="pass a ti.ndarray(...) or a numpy array")
    expected = annotation.element_shape
    if expected is not None and tuple(expected) != value.element_shape:
        raise TinyadTypeError(f"{where} is declared with elements of shape {tuple(expected)}, "
                              f"got an ndarray with elements of shape {value.element_shape}")
    if annotation.element_dim and len(value.element_shape) != annotation.element_dim:
        raise TinyadTypeError(f"{where} is declared with element_dim={annotation.element_dim}, "
                              f"got an ndarray with elements of shape {value.element_shape}")
    if annotation.dtype is not None:
        scalar, _ = _element_type(annotation.dtype)
        if T.resolve_dtype(scalar) != value.dtype:
            raise TinyadTypeError(f"{where} is declared {T.resolve_dtype(scalar)}, got an "
                                  f"ndarray of {value.dtype}")
    if annotation.ndim is not None and annotation.ndim != len(value.shape):
        raise TinyadTypeError(f"{where} is declared with ndim={annotation.ndim}, got an ndarray "
                              f"of shape {value.shape}")
    return value


def _wrap_numpy(array: np.ndarray, annotation, where: str) -> Ndarray:
    known = _wrapped.get(id(array))
    if known is not None and known[0]() is array and known[1]() is not None:
        return known[1]()
    if not array.flags.c_contiguous:
        if not array.flags.f_contiguous:
            raise TinyadTypeError(f"{where}: the numpy array is not contiguous (a slice with "
                                  "steps): pass np.ascontiguousarray(a), and copy results back")
        # A transpose, as Taichi takes it: the kernel gets a copy in C order, copied back after
        wrapper = _wrap_numpy(np.ascontiguousarray(array), annotation, where)
        wrapper.copy_back_to = array
        return wrapper
    try:
        dtype = T.from_numpy(array.dtype)
    except TypeError:
        raise TinyadTypeError(f"{where}: tinyad has no type for numpy dtype "
                              f"{array.dtype}") from None
    element_shape = tuple(annotation.element_shape or ())
    if annotation.element_dim:       # (the sizes are the array's own)
        dims = annotation.element_dim
        if array.ndim <= dims:
            axes = "last axis is" if dims == 1 else f"last {dims} axes are"
            raise TinyadTypeError(f"{where} is declared with element_dim={dims}: a numpy "
                                  f"array's {axes} an element's, and shape {array.shape} "
                                  "leaves none to index")
        element_shape = array.shape[array.ndim - dims:]
    split = array.ndim - len(element_shape)
    if split < 0 or array.shape[split:] != element_shape:
        raise TinyadTypeError(f"{where} has elements of shape {element_shape}; the numpy array "
                              f"has shape {array.shape}")
    wrapper = Ndarray(dtype, array.shape[:split], element_shape, "array", array=array)
    _wrapped[id(array)] = (weakref.ref(array), weakref.ref(wrapper))
    if len(_wrapped) > 256:     # forget the entries of arrays gone
        for key in [k for k, (a, w) in _wrapped.items() if a() is None or w() is None]:
            del _wrapped[key]
    return wrapper


def trace_signature(array: Ndarray, annotation) -> tuple:
    """What a trace of a kernel depends on in one ndarray argument."""
    if annotation.needs_grad is False:
        return (*array.signature[:3], False)
    return array.signature


def _has_grad(array: Ndarray, annotation) -> bool:
    return array.grad is not None and annotation.needs_grad is not False


def parameter(name: str, array: Ndarray, annotation, position: int) -> ArrayParam:
    """The IR stand-in for parameter `name` (the kernel's `position`-th ndarray parameter),
    traced for arrays like `array`."""
    param = ArrayParam(name, array.dtype, array.shape, array.element_shape, position=position)
    return param.with_grad() if _has_grad(array, annotation) else param
