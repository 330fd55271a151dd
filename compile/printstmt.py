"""print() and assert in generated code (a mixin of compile/pysource.py's generator)."""
from __future__ import annotations

import string

from tinyad.compile.pyexpr import Site
from tinyad.core import ir


class PrintStatements:
    """Emitting print() and assert statements, mixed into the generator."""

    def print_stmt(self, s: ir.Print, depth):
        """print(): the values in temporaries, then formatted by the interpreter's own function
        in an object-mode block (numba's print would show an f32 as its f64 widening). Prints
        from a prange loop's iterations come in any order, as in Taichi."""
        names = []
        for v in s.values:
            names.append(self.names.temp("p"))
            self.line(depth, f"{names[-1]} = {self.typed(v)}", s.loc)
        if self.target == "cuda":   # no object mode on the device: CUDA's printf, default formats
            pieces, values = [], iter(names)
            for literal, slot, _, _ in string.Formatter().parse(s.template):
                pieces += [repr(literal)] if literal else []
                pieces += [next(values)] if slot is not None else []
            self.line(depth, f"print({', '.join(pieces)})", s.loc)   # CUDA's ends the line
            return
        self.uses_print = True
        values = "".join(f"{n}, " for n in names)
        self.line(depth, "with objmode():", s.loc)
        self.line(depth + 1, f"print(print_text({s.template!r}, ({values})), end='')", s.loc)

    def assert_stmt(self, s: ir.Assert, depth):
        """Checked in debug mode on the CPU (compile/rt.py's check_assert); elsewhere an assert
        costs nothing, as in Taichi."""
        if not (self.debug and self.target == "cpu"):
            self.line(depth, "pass", s.loc)      # (a block may hold nothing else)
            return
        site = len(self.sites)
        self.sites.append(Site(None, s.loc, s.template))
        self.helpers.add("check_assert")
        values = "".join(f"{self.typed(v)}, " for v in s.values)
        self.line(depth, f"check_assert({site}, {self.typed(s.cond)}, ({values}))", s.loc)
