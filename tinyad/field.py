"""Global fields: numpy-backed arrays with optional gradient (`.grad`) and tangent (`.dual`) twins.

A vector or matrix field stores its components on trailing axes: `ti.Vector.field(2, f32, N)`
is an (N, 2) array. `shape` is the user's shape (N,), as in Taichi.
"""
from __future__ import annotations

import numpy as np

from tinyad import tapeops, undo
from tinyad.absent import AbsentTwin
from tinyad.allocation import allocate, normalize_shape
from tinyad.core import types as T
from tinyad.core.errors import (
    TinyadError,
    TinyadIndexError,
    TinyadRuntimeError,
    TinyadTypeError,
    index_range,
)
from tinyad.frontend.lang import MatrixType, VectorType
from tinyad.frontend.matrix import Matrix, Vector
from tinyad.notices import note as runtime_note
from tinyad.runtime import captured_access, python_storage, runtime
from tinyad.taichi_internals import SNodeHandle
from tinyad.twins import layout_changed
from tinyad.varnames import caller_variable_name


class Field:
    """One global field. `data` is its numpy array once its shape is known."""

    is_tinyad_field = True   # how the layers below the API recognise a field (core/ir.py)
    is_ndarray = False

    def __init__(self, dtype, shape=None, element_shape=(), name=None, needs_grad=False,
                 needs_dual=False, primal=None, role="primal", offset=None):
        if dtype is None:        # numpy would read None as float64
            raise TinyadTypeError("a field needs a dtype, got None", hint="e.g. ti.field(ti.f32, "
                                  "shape=n)")
        self.dtype = T.resolve_dtype(dtype)
        self.element_shape = tuple(element_shape)
        self.name = name or f"field{len(runtime.fields)}"
        self.role = role          # "primal", "grad" or "dual"
        self.primal = primal      # for .grad/.dual fields: the field they belong to
        self._grad: Field | None = None     # x.grad (a Field, or absent: see the properties)
        self._dual: Field | None = None
        self.snode: SNode | None = None   # where ti.root...place() put it (shape= fields: none)
        # A grad field that exists so that the program can place it (Taichi gives every real
        # field one), but that nobody asked for yet: needs_grad, place(x.grad) or lazy_grad()
        # ask for it; unasked at the first launch, it is dropped (the field has no gradient).
        self.requested = True
        # The values on the host, once placed. A backend may keep another copy that kernels
        # use (CUDA): read and write through `data` or the storage, not this array directly.
        self.host_array: np.ndarray | None = None
        self._shape = None
        # The first index along each axis (Taichi's offset=); None: all 0. Kernels and Python
        # scope subtract it before they touch storage: the IR only sees indices from 0.
        self.offset = _normalize_offset(offset)
        self.generation = runtime.generation   # ti.init() starts a new one: this field is gone
        if role == "primal":
            runtime.fields.append(self)
            if (needs_grad or needs_dual) and not self.dtype.is_float:
                raise TinyadTypeError(
                    f"field {self.name} has dtype {self.dtype}: only float fields can have "
                    "needs_grad=True or needs_dual=True",
                    hint="use ti.f32 or ti.f64, or drop needs_grad (integers have no gradient)")
            if needs_grad:
                self._grad = self._twin("grad")
            elif self.dtype.is_float and shape is None:
                self._grad = self._twin("grad")
                self._grad.requested = False
                unrequested_grads.append(self)
            if needs_dual:
                self._dual = self._twin("dual")
            elif self.dtype.is_float and shape is None:   # the same for a dual (place(x.dual))
                self._dual = self._twin("dual")
                self._dual.requested = False
                if self._grad is None or self._grad.requested:
                    unrequested_grads.append(self)
            self._give_grad_a_dual()
        layout_changed()          # (a field made, its twins given)
        if shape is not None:
            self._place(normalize_shape(shape))

    @property
    def data(self) -> np.ndarray | None:
        """The values, a numpy array the caller may read and write. Where kernels work on
        another copy (CUDA fast mode) it is brought back first, and since the caller may write
        through it, that copy is sent again before the next launch. (tinyad's own way to the
        values, the rule checker's too: ti.capture neither records nor refuses it.)"""
        storage = runtime.backend.storage
        array = storage.to_host(self)
        storage.invalidate(self)
        return array

    def _give_grad_a_dual(self) -> None:
        """A field with both twins gets x.grad.dual too: forward mode over an adjoint kernel
        (a Hessian-vector product) carries the gradient's tangent there."""
        if self._grad is not None and self._dual is not None and self._grad.dual is None and \
                self._dual.requested:
            self._grad.dual = self._grad._twin("dual")

    def _twin(self, role: str) -> "Field":
        twin = Field(self.dtype, None, self.element_shape, f"{self.name}.{role}", primal=self,
                     role=role)
        twin.offset = self.offset
        if self._shape is not None:   # (lazy_grad on a placed field): beside it, as Taichi
            twin._place(self._shape)
            if self.snode is not None and self.snode.parent() is not None:
                twin.snode = _place_node(twin, self.snode.parent())
        return twin

    def _place(self, shape: tuple[int, ...]) -> None:
        if self._shape is not None:
            if self.role in ("grad", "dual") and self._shape == shape:
                return   # placed with its primal already (needs_grad=True), then again: harmless
            raise TinyadRuntimeError(f"field {self.name} is already placed with shape "
                                     f"{self._shape}",
                                     hint="place each field once (a field's shape is fixed)")
        partner = self.primal if self.role == "grad" else self._grad
        if partner is not None and partner._shape is not None and partner._shape != shape:
            raise TinyadTypeError(f"field {self.name} placed with shape {shape}, but "
                                  f"{partner.name} has shape {partner._shape}: a field and its "
                                  "gradient must have the same shape")
        if self.offset is not None and len(self.offset) != len(shape):
            raise TinyadTypeError(f"field {self.name} has {len(shape)} dimension(s) {shape} but "
                                  f"offset {self.offset} has {len(self.offset)}")
        self._shape = shape
        layout_changed()
        self.requested = True
        if self.role == "dual" and self.primal is not None:   # a placeholder dual, now placed
            self.primal._give_grad_a_dual()
        if self.snode is None:   # shape=: as Taichi's ti.root.dense(shape).place(x)
            self.snode = _place_node(self, SNode(shape, parent=root, kind="dense"))
        self.host_array = allocate(self, shape)
        for twin in (self._grad, self._dual):
            if twin is not None and twin._shape is None and twin.requested:
                twin._place(shape)

    # ---- properties --------------------------------------------------------------------
    @property
    def grad(self):
        """The gradient field. A float field without one (no needs_grad=True, lazy_grad or
        place) gives an `AbsentTwin` that says so when used (tinyad/absent.py)."""
        if self._grad is None and self._twin_may_be_absent():
            return AbsentTwin(self, "grad")
        return self._grad

    @grad.setter
    def grad(self, twin: Field | None) -> None:
        self._grad = twin
        layout_changed()

    @property
    def dual(self):
        """The tangent field of forward mode (needs_dual=True); absent as `grad` is."""
        if self._dual is None and self._twin_may_be_absent():
            return AbsentTwin(self, "dual")
        return self._dual

    @dual.setter
    def dual(self, twin: Field | None) -> None:
        self._dual = twin
        layout_changed()

    def _twin_may_be_absent(self) -> bool:
        """As Taichi: a float field's x.grad is an (empty) field object even without one; an
        integer field's, an ndarray's and a twin's own twins are None."""
        return self.role == "primal" and self.dtype.is_float and not self.is_ndarray

    def twin_field(self, role: str) -> Field | None:
        """x.grad ("grad") or x.dual ("dual") where it exists, else None (tinyad's own code asks
        this; users get `grad`/`dual`)."""
        return self._grad if role == "grad" else self._dual

    @property
    def has_grad(self) -> bool:
        return self._grad is not None

    @property
    def has_dual(self) -> bool:
        return self._dual is not None

    @property
    def shape(self) -> tuple[int, ...]:
        self._require_placed()
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def n(self) -> int:
        return self.element_shape[0] if self.element_shape else 1

    @property
    def m(self) -> int:
        return self.element_shape[1] if len(self.element_shape) > 1 else 1

    @property
    def is_placed(self) -> bool:
        return self._shape is not None

    def require_current(self, loc=None) -> None:
        """A field from before the last ti.init() is gone, as in Taichi: say so where it is used."""
        if self.generation != runtime.generation:
            raise TinyadRuntimeError(f"field {self.name} was created before the last ti.init() "
                                     "or ti.reset(), which discards every field", loc,
                                     hint="create fields after ti.init() (after each ti.reset(), "
                                          "create them again)")

    def _require_placed(self):
        if self.generation != runtime.generation:    # (asked here first: no frame mostly)
            self.require_current()
        if self._shape is None:
            raise TinyadRuntimeError(
                f"field {self.name} has no shape yet: give shape= or place it with "
                f"ti.root.dense(...).place({self.name})")

    def __repr__(self):
        shape = self._shape if self._shape is not None else "unplaced"
        kind = f"{'x'.join(map(str, self.element_shape))} " if self.element_shape else ""
        return f"<tinyad field {self.name}: {kind}{self.dtype} {shape}>"

    def __str__(self):
        """Its values, as Taichi prints a field (`print(x.grad)`); repr() says what it is.
        A field without values (unplaced, or of an earlier ti.init) prints its repr."""
        try:
            values = self.to_numpy()
        except TinyadError:
            return repr(self)
        return str(values[()] if values.ndim == 0 else values)

    # ---- Python-scope access -----------------------------------------------------------
    def _index(self, key) -> tuple[int, ...]:
        self._require_placed()
        if key is None:
            key = ()
        elif isinstance(key, Matrix):
            key = tuple(key.entries)
        elif not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(self._shape):
            raise TinyadIndexError(f"field {self.name} has {len(self._shape)} dimension(s) "
                                   f"{self._shape}, indexed with {len(key)} index(es) {key}",
                                   hint="give one index per dimension (x[None] for a 0-D field)")
        index = tuple(int(k) for k in key)
        first = self.offset or (0,) * len(index)
        for k, o, extent in zip(index, first, self._shape):
            if not o <= k < o + extent:
                where = "" if self.offset is None else f" with offset {self.offset}"
                raise TinyadIndexError(f"index {index} is out of bounds for field {self.name} "
                                       f"of shape {self._shape}{where}",
                                       hint=index_range(self._shape, self.offset))
        return index if self.offset is None else tuple(k - o for k, o in zip(index, first))

    def __getitem__(self, key):
        index = self._index(key)
        captured_access(self, "read")
        value = _storage().to_host(self)[index]
        if self.role == "grad":       # (a vector's too: v.grad[i])
            tapeops.gradient_read(self, index)
        if self.element_shape:
            return _ElementView(self, index, value.tolist())
        runtime.backend.checks.python_read(self, index, value)
        return value.item()

    def __setitem__(self, key, value):
        index = self._index(key)
        self._python_will_write()
        _storage().set_element(self, index, _as_element(value, self.element_shape, self.name))
        self._python_wrote(index)
        tapeops.element_written(self, index)

    def _python_will_write(self, loc=None):
        """Before a Python-scope write: a Tape's undo log and the rule checker (fast mode's
        copies) may need the values it is about to replace. `loc`: the user's line where
        tinyad writes for the user (a Tape clearing gradients), None for the user's own write."""
        undo.before_python_write(self)
        runtime.backend.checks.python_will_write(self, loc)

    def _python_wrote(self, index=None, loc=None):
        """Tell the rule checker (where the backend has one) about a Python-scope write."""
        runtime.backend.checks.python_write(self, index, loc)

    def to_numpy(self, dtype=None) -> np.ndarray:
        self._require_placed()
        captured_access(self, "read")
        array = _storage().to_host(self)
        if self.role == "grad":
            tapeops.gradient_read(self)
        return array.astype(dtype) if dtype is not None else array.copy()

    def from_numpy(self, array) -> None:
        self._load(array)
        tapeops.loaded(self, array)

    def _load(self, array) -> None:
        self._require_placed()
        array = np.asarray(array)
        expected = self._shape + self.element_shape
        if array.shape != expected:
            raise TinyadTypeError(f"from_numpy: field {self.name} has shape {expected} "
                                  f"(field shape {self._shape} + element {self.element_shape}), "
                                  f"the array has shape {array.shape}",
                                  hint="reshape the array first, or make the field that shape")
        if array.dtype.kind not in "biuf":
            raise TinyadTypeError(f"from_numpy: array dtype {array.dtype} is not numeric",
                                  hint="convert it to numbers first, e.g. .astype(np.float32)")
        if self.dtype.is_int and array.dtype.kind == "f":
            raise TinyadTypeError(f"from_numpy: field {self.name} is {self.dtype}, the array "
                                  f"is {array.dtype}",
                                  hint=f"convert it with .astype(np.{self.dtype.np.__name__}) "
                                       "first (rounding is your choice to make)")
        captured_access(self, "load")
        self._python_will_write()
        _storage().assign(self, array)      # overwritten: nothing is brought back first
        self._python_wrote()

    def fill(self, value) -> None:
        self._fill(value, None)

    def _fill(self, value, loc, by_tape=False) -> None:
        """fill(value), for the user's line `loc` (None: found where needed); `by_tape`: a
        Tape's own fill (of its loss), which nothing records."""
        self._require_placed()
        self._python_will_write(loc)
        _storage().fill(self, value)        # on the device, where the field lives there
        self._python_wrote(None, loc)
        if not by_tape:
            tapeops.filled(self, value)

    def copy_from(self, other: "Field") -> None:
        """Inside a Tape, recorded and differentiated as Taichi's copy kernel (tapeops.py)."""
        if not isinstance(other, Field):
            raise TinyadTypeError("Cannot copy from a non-field object", hint="copy_from takes "
                                  "a field (from_numpy takes an array)")
        self._load(_storage().to_host(other))
        tapeops.copied(self, other)


_storage = python_storage    # where this ti.init's backend keeps field values (backend.py)


class _ElementView(Matrix):
    """`x[i]` of a vector or matrix field in Python scope: a Matrix whose entry assignments
    (`x[i][1] = 0.5`) write through to the field, as in Taichi."""

    def __init__(self, fld, index, entries):
        super().__init__(entries)
        self._field, self._index_in_field = fld, index

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self._field[self._index_in_field] = self.to_numpy()


def _as_element(value, element_shape, name):
    if not element_shape:
        if isinstance(value, (Matrix, list, tuple, np.ndarray)):
            raise TinyadTypeError(f"field {name} holds scalars, got {type(value).__name__}")
        return value
    array = np.asarray(value.to_numpy() if isinstance(value, Matrix) else value)
    if array.shape != element_shape:
        raise TinyadTypeError(f"field {name} holds {element_shape} elements, got shape "
                              f"{array.shape}")
    return array


# ---- ti.field / ti.Vector.field / ti.Matrix.field and the old ti.var spellings ----------------

def field(dtype, shape=None, name=None, offset=None, needs_grad=False, needs_dual=False,
          layout=None) -> Field:
    if isinstance(dtype, (VectorType, MatrixType)):   # ti.field(ti.math.vec3, n), as Taichi
        return _typed_field(dtype, shape, name or caller_variable_name(), offset, needs_grad,
                            needs_dual)
    return Field(dtype, shape, (), name or caller_variable_name(), needs_grad, needs_dual,
                 offset=offset)


def _typed_field(kind, shape=None, name=None, offset=None, needs_grad=False,
                 needs_dual=False, layout=None) -> Field:
    """A field of a vector or matrix type: `vec3.field(shape=n)`, `ti.field(vec3, n)`."""
    dtype = kind.dtype if kind.dtype is not None else float    # ti.math.vec3: default_fp
    return Field(dtype, shape, kind.shape, name or caller_variable_name(), needs_grad,
                 needs_dual, offset=offset)


def vector_field(n, dtype, shape=None, name=None, offset=None, needs_grad=False,
                 needs_dual=False, layout=None) -> Field:
    return Field(dtype, shape, (int(n),), name or caller_variable_name(), needs_grad, needs_dual,
                 offset=offset)


def matrix_field(n, m, dtype, shape=None, name=None, offset=None, needs_grad=False,
                 needs_dual=False, layout=None) -> Field:
    return Field(dtype, shape, (int(n), int(m)), name or caller_variable_name(), needs_grad,
                 needs_dual, offset=offset)


def _normalize_offset(offset):
    if offset is None:
        return None
    offset = (int(offset),) if isinstance(offset, (int, np.integer)) else \
        tuple(int(o) for o in offset)
    return offset if any(offset) else None


def var(dt, shape=None, offset=None, needs_grad=False) -> Field:
    """The old spelling of ti.field (seed 000)."""
    return field(dt, shape, offset=offset, needs_grad=needs_grad)


# ti.Vector.field / ti.Matrix.field and their old spellings (.var). The matrix value type lives in
# the kernel language, which knows nothing of storage; fields give it these constructors here.
def _matrix_var(n, m, dt, shape=None, offset=None, needs_grad=False) -> Field:
    return matrix_field(n, m, dt, shape, offset=offset, needs_grad=needs_grad)


def _vector_var(n, dt, shape=None, offset=None, needs_grad=False) -> Field:
    return vector_field(n, dt, shape, offset=offset, needs_grad=needs_grad)


Matrix.field, Matrix.var = staticmethod(matrix_field), staticmethod(_matrix_var)
Vector.field, Vector.var = staticmethod(vector_field), staticmethod(_vector_var)
VectorType.field = MatrixType.field = _typed_field      # ti.math.vec3.field(shape=n)


# ---- ti.root: the dense layouts Taichi programs use to place fields ---------------------------

class Axis:
    """ti.i, ti.j, ti.ij, ...: the axes a `dense` level spans, by letter."""

    def __init__(self, letters):
        self.letters = tuple(letters) if isinstance(letters, str) else (None,) * int(letters)
        self.count = len(self.letters)


def axes(*indices: int) -> Axis:
    """ti.axes(0, 2): the axes by number, ti.axes(0) being ti.i, ti.axes(1) ti.j, and so on."""
    letters = "ijklmnop"
    if not all(isinstance(n, int) and 0 <= n < len(letters) for n in indices):
        raise TinyadTypeError(f"ti.axes takes axis numbers 0 to {len(letters) - 1}, got {indices}")
    return Axis("".join(letters[n] for n in indices))


class SNode:
    """A level of Taichi's layout tree. tinyad stores every field densely, so only the total
    shape matters: `ti.root.dense(ti.i, 4).dense(ti.j, 3).place(x)` gives x the shape (4, 3).
    Indices come in the order of their axis letters, i j k l, whatever order the levels are
    written in (`dense(ti.l, 7).dense(ti.i, 3)` is (3, 7), indexed x[i, t]), as in Taichi 1.7.4:
    DiffTaichi's electric indexes `hidden[i, t]` under `dense(ti.l, steps).dense(ti.i, n)`."""

    def __init__(self, shape=(), parent: "SNode | None" = None, kind: str = "root", axes=None):
        self._shape = tuple(shape)
        self._axes = tuple(axes) if axes is not None else (None,) * len(self._shape)
        self._parent = parent
        self.kind = kind          # "root", "dense", "place", or the sparse kind it stands for
        self.placed: Field | None = None   # a "place" node: the one field it holds

    @property
    def ptr(self) -> SNodeHandle:
        """Taichi's handle on the C++ SNode: the queries Taichi's tests make of it."""
        return SNodeHandle(self)

    def dense(self, axes, dimensions, kind: str = "dense") -> "SNode":
        dims = normalize_shape(dimensions)
        count = axes.count if isinstance(axes, Axis) else len(axes)
        if len(dims) == 1 and count > 1:
            dims = dims * count
        if len(dims) != count:
            raise TinyadTypeError(f"{kind}: {count} axes but {len(dims)} dimensions {dims}")
        letters = axes.letters if isinstance(axes, Axis) else (None,) * count
        shape, names = list(self._shape), list(self._axes)
        for letter, extent in zip(letters, dims):
            if letter is not None and letter in names:   # Taichi's blocking: the axis grows
                shape[names.index(letter)] *= extent
            else:                                        # a new axis
                shape.append(extent)
                names.append(letter)
        order = _axis_order(names)
        return SNode([shape[a] for a in order], parent=self, kind=kind,
                     axes=[names[a] for a in order])

    def pointer(self, axes, dimensions) -> "SNode":
        return self._sparse("pointer", axes, dimensions)

    def bitmasked(self, axes, dimensions) -> "SNode":
        return self._sparse("bitmasked", axes, dimensions)

    def dynamic(self, axis, dimensions, chunk_size=None) -> "SNode":
        return self._sparse("dynamic", axis, dimensions)

    def _sparse(self, kind, axes, dimensions) -> "SNode":
        """No sparsity in tinyad: every cell exists, stored densely (said once per ti.init)."""
        if runtime.generation not in _told_dense_backed:
            _told_dense_backed.add(runtime.generation)
            runtime_note(f"ti.root.{kind}(...) is stored densely in tinyad: every cell exists "
                         "and is active, and the memory is that of a dense layout")
        return self.dense(axes, dimensions, kind=kind)

    def parent(self, n: int = 1) -> "SNode | None":
        """The level `n` steps up (Taichi's SNode.parent); None above ti.root."""
        node = self
        for _ in range(n):
            node = node._parent if node is not None else None
        return node

    def place(self, *fields, offset=None) -> "SNode":
        for f in fields:
            if isinstance(f, (list, tuple)):
                self.place(*f, offset=offset)
            elif getattr(f, "is_tinyad_struct_field", False):   # tinyad/structfield.py
                self.place(*f._leaves(), offset=offset)
            elif isinstance(f, Field):
                if offset is not None:
                    for each in (f, f._grad, f._dual):
                        if each is not None:
                            each.offset = _normalize_offset(offset)
                f._place(self._shape)
                f.snode = _place_node(f, self)
            elif f is None:
                raise TinyadTypeError("place() got None where a field belongs")
            else:
                raise TinyadTypeError(f"place() takes fields, got {type(f).__name__}")
        return self

    def lazy_grad(self) -> None:
        """Give every float field a gradient field laid out as the field is (Taichi's
        ti.root.lazy_grad): fields placed later get theirs when they are placed."""
        for f in runtime.fields:
            if not f.dtype.is_float:
                continue
            if f._grad is None:
                f._grad = f._twin("grad")
            f._grad.requested = True
            if f.is_placed and not f._grad.is_placed:
                f._grad._place(f.shape)
                f._grad.snode = _place_node(f._grad, f.snode.parent())   # beside x, as Taichi
            f._give_grad_a_dual()
        layout_changed()

    def lazy_dual(self) -> None:
        for f in runtime.fields:
            if f.dtype.is_float and f._dual is None:
                f._dual = f._twin("dual")
            if f._dual is not None and not f._dual.requested:   # a placeholder: asked for now
                f._dual.requested = True
                if f.is_placed and not f._dual.is_placed:
                    f._dual._place(f.shape)
                    f._dual.snode = _place_node(f._dual, f.snode.parent())
            f._give_grad_a_dual()
        layout_changed()

    @property
    def shape(self):
        return self._shape


def _place_node(fld: Field, parent: SNode) -> SNode:
    node = SNode(parent.shape, parent=parent, kind="place")
    node.placed = fld
    return node


def _axis_order(names) -> list[int]:
    """Positions of the axes sorted by letter (i, j, k, l, ...), Taichi's index order; axes
    given by count rather than by letter keep the order written."""
    if None in names:
        return list(range(len(names)))
    return sorted(range(len(names)), key=lambda a: "ijklmnop".find(names[a]))


root = SNode()
_told_dense_backed: set[int] = set()   # the ti.init generations told that sparse is dense here
# fields whose grad field may still be placed (callers ask `if unrequested_grads:` before
# calling settle_layout: a frame at every launch otherwise; the list is never rebound)
unrequested_grads: list = []


def settle_layout() -> None:
    """At a kernel launch, the layout is final (Taichi materialises it then): a gradient (or
    dual) field that was neither asked for (needs_grad, lazy_grad, ...) nor placed is dropped."""
    while unrequested_grads:
        f = unrequested_grads.pop()
        if f._grad is not None and not f._grad.requested and not f._grad.is_placed:
            f._grad = None
        if f._dual is not None and not f._dual.requested and not f._dual.is_placed:
            f._dual = None
        layout_changed()
