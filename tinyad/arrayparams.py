"""Ndarray kernel arguments in the IR: a global like a field, bound to an array at launch.

A kernel parameter annotated `ti.types.ndarray()` is traced as an `ArrayParam`: it describes the
array as fields are described (`name`, `dtype`, `shape`, `element_shape`, `role`, `.grad`), so
every IR consumer treats it as one, and the printer shows it by the parameter's name. It has no
values of its own: at launch, `bound` is the array (a tinyad/ndarray.py Ndarray, itself a field)
passed for it, and its values are that array's. A trace is specialised on the arrays' dtype,
element shape, shape and gradient, not on which arrays they are.

`bind_arrays` gives an IR in which each ArrayParam is replaced by the array it stands for: what
interp mode runs and what the rule checkers reason about, since they key their memory on the
arrays themselves (two kernels passed one array touch one array).
"""
from __future__ import annotations

from dataclasses import replace

from tinyad.core import ir


class ArrayParam:
    """The IR's stand-in for one ndarray parameter (or its `.grad`)."""

    is_tinyad_field = True     # IR consumers treat it as a field (core/ir.py is_field)
    is_array_param = True

    def __init__(self, name, dtype, shape, element_shape=(), role="primal", primal=None,
                 position=0):
        self.name, self.dtype, self.position = name, dtype, position   # position: among them
        self._shape, self.element_shape = tuple(shape), tuple(element_shape)
        self.role, self.primal = role, primal
        self.grad: ArrayParam | None = None
        self.dual = None            # forward mode over ndarrays keeps no tangents
        self.snode = None
        self.requested = True
        self.bound = None           # the array of the current launch (None: not launched)

    @property
    def has_grad(self) -> bool:       # (as a Field's: tinyad/field.py)
        return self.grad is not None

    has_dual = False

    def twin_field(self, role: str) -> ArrayParam | None:
        return self.grad if role == "grad" else None

    def with_grad(self) -> ArrayParam:
        self.grad = ArrayParam(f"{self.name}.grad", self.dtype, self._shape, self.element_shape,
                               role="grad", primal=self, position=self.position)
        return self

    # The field description IR consumers read (as tinyad/field.py's Field)
    shape = property(lambda self: self._shape)
    ndim = property(lambda self: len(self._shape))
    n = property(lambda self: self.element_shape[0] if self.element_shape else 1)
    m = property(lambda self: self.element_shape[1] if len(self.element_shape) > 1 else 1)
    is_placed = True

    # Values: those of the bound array (fast mode's compiled launcher reads `host_array`)
    @property
    def host_array(self):
        return self._array().host_array

    @property
    def data(self):
        return self._array().data

    def _array(self):
        if self.bound is None:
            raise RuntimeError(f"ndarray argument {self.name} is used outside a launch")
        return self.bound

    def __repr__(self):
        return f"<ndarray argument {self.name}: {self.dtype} {self._shape}>"


def bind(params: dict, arrays: dict) -> dict:
    """{ArrayParam: array} for each parameter name in both `params` and `arrays`, grads too.
    A parameter without a grad binds none, even if its array has one (needs_grad=False)."""
    mapping = {}
    for name, param in params.items():
        array = arrays[name]
        mapping[param] = array
        if param.grad is not None:
            mapping[param.grad] = array.grad
    return mapping


def set_bound(mapping: dict) -> None:
    """Point each ArrayParam at its array for the launch about to run."""
    for param, array in mapping.items():
        param.bound = array


def bind_arrays(kernel: ir.Kernel, mapping: dict, memo: dict) -> ir.Kernel:
    """`kernel` with every access to a key of `mapping` going to its value instead. `memo`
    (id of a node -> its bound copy) is shared by the variants of one binding: a node the
    adjoint shares with the primal (a replayed load) stays one node after binding, as the
    checkers expect."""
    def expr(e):
        if not isinstance(e, (ir.Load, ir.Op)):
            return e
        done = memo.get(id(e))
        if done is None:
            if isinstance(e, ir.Load):
                done = replace(e, field=mapping.get(e.field, e.field),
                               indices=tuple(expr(i) for i in e.indices))
            else:
                done = replace(e, args=tuple(expr(a) for a in e.args))
            memo[id(e)] = done
        return done

    def stmt(s):
        done = memo.get(id(s))
        if done is not None:
            return done
        new = s
        if isinstance(s, (ir.Store, ir.AtomicOp)):
            new = replace(s, field=mapping.get(s.field, s.field),
                          indices=tuple(expr(i) for i in s.indices), value=expr(s.value))
        elif isinstance(s, (ir.Assign, ir.Return)):
            new = replace(s, value=expr(s.value))
        elif isinstance(s, (ir.If, ir.While)):
            new = replace(s, cond=expr(s.cond))
        elif isinstance(s, ir.For):
            new = replace(s, start=expr(s.start), stop=expr(s.stop))
        elif isinstance(s, ir.Print):
            new = replace(s, values=tuple(expr(v) for v in s.values))
        elif isinstance(s, ir.Assert):
            new = replace(s, cond=expr(s.cond), values=tuple(expr(v) for v in s.values))
        new = ir.with_blocks(new, [tuple(stmt(x) for x in block)
                                   for block in ir.child_blocks(s)])
        memo[id(s)] = new
        return new

    return replace(kernel, body=tuple(stmt(s) for s in kernel.body))
