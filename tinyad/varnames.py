"""The name a user gave a field: `x` in `x = ti.field(...)`, read from the calling line, so that
errors and reports can say `x[3]` rather than `field7[3]`."""
from __future__ import annotations

import ast
import inspect
import re

from tinyad.core.srcloc import user_frame

_ASSIGNED_NAME = re.compile(r"^\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*(?::[^=]*)?=(?!=)")


def caller_variable_name() -> str | None:
    """`x` in `x = ti.field(...)` (`self.x` in `self.x = ...`), read from the user's calling
    line, so errors can name it."""
    frame = user_frame()
    if frame is None:
        return None
    if frame.f_code.co_name == "<lambda>" and frame.f_back is not None:
        # DiffTaichi's `vec = lambda: ti.Vector.field(2, dtype=real)`, then `v = vec()`: v
        outer = _assigned_name(frame.f_back)
        if outer is not None:
            return outer
    return _assigned_name(frame)


def _assigned_name(frame) -> str | None:
    info = inspect.getframeinfo(frame, context=1)
    line = info.code_context[0] if info.code_context else ""
    match = _ASSIGNED_NAME.match(line)
    if match is not None:
        return match.group(1)
    return _tuple_target(frame, line) if "," in line.split("=", 1)[0] else None


def _tuple_target(frame, line: str) -> str | None:
    """`b` in `a, b = ti.field(...), ti.field(...)`: the target whose value holds the call the
    frame is making, told apart by the call's column (the code's positions, Python 3.11+)."""
    try:
        statement = ast.parse(line.strip()).body[0]
        _, _, column, _ = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    except (SyntaxError, IndexError, AttributeError):
        return None
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Tuple)
            and isinstance(statement.value, ast.Tuple) and column is not None):
        return None
    column -= len(line) - len(line.lstrip())     # (the statement was parsed without its indent)
    for target, value in zip(statement.targets[0].elts, statement.value.elts):
        if isinstance(target, ast.Name) and value.col_offset <= column < value.end_col_offset:
            return target.id
    return None
