"""Which gradient and dual fields are placed now (`placed_twins`): what clear_all_gradients
zeroes, and a Tape at each entry. A walk over every field costs a Tape of a small kernel more
than its launch, so each answer is kept until the layout changes: tinyad/field.py calls
`layout_changed` wherever a field is made or placed, or a twin given or dropped (lazy_grad
may add gradients after a Tape has run), and ti.init's new field list forgets them too.
"""
from __future__ import annotations

from tinyad.runtime import runtime

_found: dict = {}     # role -> (the field list it was found in, the twins)


def layout_changed() -> None:
    if _found:
        _found.clear()


def placed_twins(role: str) -> tuple:
    """Every field's placed .grad (role "grad") or .dual, and each placed .grad's own .dual."""
    known = _found.get(role)
    if known is not None and known[0] is runtime.fields:
        return known[1]
    found = []
    for f in runtime.fields:
        twin, grad = (f._grad if role == "grad" else f._dual), f._grad
        if twin is not None and twin._shape is not None:
            found.append(twin)
        if grad is not None and grad._dual is not None and grad._dual._shape is not None:
            found.append(grad._dual)
    _found[role] = (runtime.fields, tuple(found))
    return _found[role][1]


def placed_grads() -> tuple:
    """Those of placed_twins("grad") that are gradients (not a gradient's .dual)."""
    known = _found.get("grads only")
    if known is not None and known[0] is runtime.fields:
        return known[1]
    _found["grads only"] = (runtime.fields, tuple(
        f for f in placed_twins("grad") if f.role == "grad"))
    return _found["grads only"][1]
