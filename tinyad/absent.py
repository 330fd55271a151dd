"""What `x.grad` is for a field without a gradient (and `x.dual` without a tangent).

Taichi's `x.grad` of a float field is never None: declared without `needs_grad=True` it is an
empty field object, and using it fails deep inside Taichi (`'NoneType' object has no attribute
'_snode'`). tinyad's is an `AbsentTwin`: falsy, and any use of it (`x.grad.to_numpy()`,
`x.grad[0]`, `np.asarray(x.grad)`) raises an error that says why the twin is missing and what
to declare. tinyad's own code asks `x.has_grad` / `x.has_dual` instead.
"""
from __future__ import annotations

from tinyad.core.errors import TinyadRuntimeError

_FLAG = {"grad": "needs_grad", "dual": "needs_dual"}


class AbsentTwin:
    __slots__ = ("field", "role")
    is_absent_twin = True      # how the frontend recognises one (it may not import this module)

    def __init__(self, field, role: str):
        self.field = field
        self.role = role

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<no {self.field.name}.{self.role}: {self._why()}>"

    def _why(self) -> str:
        return f"{self.field.name} was declared without {_FLAG[self.role]}=True"

    def refuse(self, *args, **kwargs):
        name, role = self.field.name, self.role
        if role == "grad":
            hint = (f"declare {name} with needs_grad=True, or call ti.root.lazy_grad() before "
                    "the first kernel launch")
        else:
            hint = f"declare {name} with needs_dual=True"
        raise TinyadRuntimeError(f"{name}.{role} does not exist: {self._why()}", hint=hint)

    def __getattr__(self, name):      # any attribute: to_numpy, fill, shape, ...
        self.refuse()

    __getitem__ = __setitem__ = __iter__ = __len__ = __array__ = __call__ = refuse
