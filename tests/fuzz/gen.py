"""Random well-formed tinyad programs, as Python source text.

A program is a module with `build(fp)`: it declares fields of float type `fp` (parameters with
needs_grad, a data field, an index field, intermediate fields, a 0-D loss), funcs and kernels,
and returns what the harness needs to run it (`harness.py`). Every program is clean by
construction: each intermediate field is written by one launch (a time-stepped field by one
launch per row, each writing a new row from the row before), kernels read only parameters and
fields written by earlier launches, gathers and stencils index in bounds, and every op's argument
stays in its domain (log and sqrt of 1 + a*a, asin of 0.9 * sin(a), ...). Values are kept bounded
(an expression whose bound grows past BOUND is squashed with tanh) so finite differences in f64
stay accurate.

The choices come from a `Draw`: hypothesis's (the strategy `programs()`, which shrinks a failing
program) or a seeded `random.Random` (the long profile, where a seed names a program).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace

BOUND = 8.0          # expressions whose magnitude could exceed this are squashed


class Draw:
    """The choices a program is made of."""

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, items):
        return items[self.integer(0, len(items) - 1)]

    def chance(self, p: float) -> bool:
        return self.integer(0, 99) < round(p * 100)

    def const(self, lo: float, hi: float) -> str:
        """A constant with two decimals, as source text."""
        value = self.integer(round(lo * 100), round(hi * 100)) / 100
        return f"({value:.2f})" if value < 0 else f"{value:.2f}"


class RandomDraw(Draw):
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, lo, hi):
        return self.rng.randint(lo, hi)


class HypothesisDraw(Draw):
    def __init__(self, draw):
        self.draw = draw

    def integer(self, lo, hi):
        from hypothesis import strategies as st  # noqa: PLC0415
        return self.draw(st.integers(lo, hi))


def programs(small: bool = False):
    """The hypothesis strategy: Program values (`small`: shallower, fewer kernels, for fast
    mode, whose compile time grows with a program's size)."""
    from hypothesis import strategies as st  # noqa: PLC0415

    @st.composite
    def strategy(draw):
        return generate(HypothesisDraw(draw), small)
    return strategy()


@dataclass
class E:
    """An expression's source text and a bound on its magnitude."""
    text: str
    bound: float


@dataclass
class Fld:
    name: str
    kind: str            # "scalar", "vector", "matrix", "time" (rows 0..T, N columns)
    dim: int = 0         # vector length / matrix size
    bound: float = 1.0
    role: str = "state"  # "param", "data", "state"


@dataclass
class Ctx:
    """What an expression inside a kernel may use."""
    fields: list                      # readable fields
    locals: dict = field(default_factory=dict)   # name -> bound
    index: str = "i"                  # the outer loop's index
    inner: tuple | None = None        # (loop index name, trip count) inside an inner loop
    stencil: bool = False             # i runs over 1..N-2: i - 1 and i + 1 are in bounds
    time_row: str | None = None       # the row a step kernel reads of its time field
    time_field: str | None = None     # ... and that field's name
    funcs: tuple = ()                 # (name, arity, bound)


@dataclass
class Program:
    source: str
    features: set
    seed: int | None = None


def _squash(e: E) -> E:
    if e.bound <= BOUND:
        return e
    return E(f"ti.tanh({2 / e.bound:.3g} * {e.text})", 1.0)


def _small(e: E, limit: float = 3.0) -> E:
    """`e`, squashed into [-limit, limit] if it might leave it (for exp, powers, products)."""
    return e if e.bound <= limit else E(f"({limit:g} * ti.tanh({e.text}))", limit)


# ---- ops: one emitter per op of tinyad/core/ops.py a kernel can spell ------------------------
# An emitter takes the generator, the context and a depth budget, and returns an E whose
# arguments are kept in the op's domain.

def _same(e: E) -> E:
    return e


def _op(template: str, bound, *prepare):
    """The emitter of `template` ({0}, {1}: the arguments' texts), whose magnitude is at most
    bound(argument bounds); one argument per `prepare`, which squashes it into a range first."""
    prepare = prepare or (_same,)

    def emit(g, ctx, depth) -> E:
        args = [p(g.expr(ctx, depth)) for p in prepare]
        return E(template.format(*(a.text for a in args)), bound(*(a.bound for a in args)))
    return emit


def _const(value):
    return lambda *bounds: value


OPS = {
    "add": _op("({0} + {1})", lambda a, b: a + b, _same, _same),
    "sub": _op("({0} - {1})", lambda a, b: a + b, _same, _same),
    "mul": _op("({0} * {1})", lambda a, b: a * b, _small, _small),
    "truediv": _op("({0} / (1.5 + ti.sin({1})))", lambda a, b: 2 * a, _same, _same),
    "pow": lambda g, c, d: g.power(c, d),
    "neg": _op("(-{0})", lambda a: a),
    "abs": _op("ti.abs({0})", lambda a: a),
    "min": _op("ti.min({0}, {1})", max, _same, _same),
    "max": _op("ti.max({0}, {1})", max, _same, _same),
    "sin": _op("ti.sin({0})", _const(1.0)),
    "cos": _op("ti.cos({0})", _const(1.0)),
    "tan": _op("ti.tan(ti.sin({0}))", _const(1.56)),                 # |sin| < pi / 2
    "asin": _op("ti.asin(0.9 * ti.sin({0}))", _const(1.2)),
    "acos": _op("ti.acos(0.9 * ti.tanh({0}))", _const(2.7)),
    "atan": _op("ti.math.atan({0})", _const(1.58)),
    "atan2": _op("ti.atan2({0}, 1.0 + ({1}) ** 2)", _const(1.58), _same, _small),
    "tanh": _op("ti.tanh({0})", _const(1.0)),
    "exp": _op("ti.exp({0})", math.exp, lambda e: _small(e, 2.0)),
    "log": _op("ti.log(0.5 + ({0}) ** 2)", lambda a: math.log(0.5 + a ** 2) + 0.7, _small),
    "sqrt": _op("ti.sqrt(0.25 + ({0}) ** 2)", lambda a: a + 0.5, _small),
    "rsqrt": _op("ti.rsqrt(0.25 + ({0}) ** 2)", _const(2.0), _small),
    "select": lambda g, c, d: g.select(c, d),
    "cast": _op("ti.cast({0}, fp)", lambda a: a),
    # a % b jumps where a / b crosses an integer: here a / b stays inside (2, 3)
    "mod": _op("((2.4 + 0.2 * ti.sin({0})) % (1.0 + 0.05 * ti.sin({1}) ** 2))", _const(0.6),
               _same, _same),
    # not differentiable: no gradient flows through them (FD sees a step: the harness skips
    # elements next to a jump)
    "floor": _op("ti.floor({0})", lambda a: a + 1),
    "stop_grad": _op("ti.stop_grad({0})", lambda a: a),
}
NOT_DIFFERENTIABLE = {"floor", "stop_grad"}


# ---- the generator ---------------------------------------------------------------------------

class Generator:
    def __init__(self, draw: Draw, small: bool = False):
        self.d = draw
        self.max_depth, self.max_stages = (2, 2) if small else (4, 4)
        self.features: set = set()
        self.n = draw.integer(3, 5)
        self.steps = draw.integer(1, 3)
        self.fields: list[Fld] = []
        self.funcs: list = []
        self.blocks: list[str] = []       # source of funcs and kernels
        self.launches: list = []          # (kernel, args text, reads, writes)
        self.counter = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    # ---- expressions --------------------------------------------------------------------
    def expr(self, ctx: Ctx, depth: int) -> E:
        depth = min(depth, self.max_depth)
        if depth <= 0 or self.d.chance(0.25):
            return self.atom(ctx)
        # floor and stop_grad are rare: a program with stop_grad gets no finite-difference check
        rare = self.d.chance(0.02)
        name = self.d.choice(sorted(NOT_DIFFERENTIABLE) if rare else DIFFERENTIABLE_OPS)
        self.features.add(f"op:{name}")
        return _squash(OPS[name](self, ctx, depth - 1))

    def power(self, ctx, depth):
        a = _small(self.expr(ctx, depth))
        form = self.d.integer(0, 2)
        if form == 0:                  # integer power of anything
            k = self.d.integer(2, 3)
            return E(f"({a.text}) ** {k}", a.bound ** k)
        if form == 1:                  # constant power of a positive base
            return E(f"(1.0 + ({a.text}) ** 2) ** {self.d.const(-1.5, 2.5)}",
                     (1 + a.bound ** 2) ** 2.5)
        b = self.expr(ctx, depth)      # both differentiated: base in [0.2, 2.2]
        return E(f"ti.pow(1.2 + ti.sin({a.text}), ti.tanh({b.text}))", 5.0)

    def select(self, ctx, depth):
        a, b = self.expr(ctx, depth), self.expr(ctx, depth)
        cond = self.condition(ctx, depth)
        if self.d.chance(0.5):
            return E(f"ti.select({cond}, {a.text}, {b.text})", max(a.bound, b.bound))
        self.features.add("ifexp")
        return E(f"({a.text} if {cond} else {b.text})", max(a.bound, b.bound))

    def condition(self, ctx, depth) -> str:
        form = self.d.integer(0 if ctx.index else 1, 2)
        if form == 0:
            return f"{ctx.index} % 2 == {self.d.integer(0, 1)}"
        a, b = self.expr(ctx, max(depth - 1, 0)), self.expr(ctx, max(depth - 1, 0))
        return f"{a.text} {self.d.choice(['<', '>', '<=', '>='])} {b.text}"

    def index(self, ctx) -> str:
        """An in-bounds index into a length-N axis."""
        i = ctx.index
        forms = ["i", "shift", "gather"]
        if ctx.stencil:
            forms += ["left", "right"]
        if ctx.inner:
            forms += ["inner"]
        form = self.d.choice(forms)
        self.features.add(f"index:{form}")
        if form == "shift":
            return f"({i} + {self.d.integer(1, self.n - 1)}) % N"
        if form == "gather":
            return f"idx[{i}]"
        if form == "left":
            return f"{i} - 1"
        if form == "right":
            return f"{i} + 1"
        if form == "inner":
            return f"({i} + {ctx.inner[0]}) % N"
        return i

    def read(self, ctx: Ctx, f: Fld) -> E:
        ix = self.index(ctx)
        if f.kind == "scalar":
            return E(f"{f.name}[{ix}]", f.bound)
        if f.kind == "time":
            row = ctx.time_row if f.name == ctx.time_field else str(
                self.d.integer(0, self.steps))
            return E(f"{f.name}[{row}, {ix}]", f.bound)
        b, n = f.bound, f.dim
        if f.kind == "vector":
            form = self.d.integer(0, 3)
            if form == 0:
                return E(f"{f.name}[{ix}][{self.d.integer(0, n - 1)}]", b)
            if form == 1:
                return E(f"{f.name}[{ix}].dot({f.name}[{self.index(ctx)}])", n * b * b)
            if form == 2:
                return E(f"{f.name}[{ix}].sum()", n * b)
            return E(f"ti.sqrt({f.name}[{ix}].norm_sqr() + 0.5)", math.sqrt(n) * b + 1)
        form = self.d.integer(0, 3)          # matrix
        if form == 0:
            return E(f"{f.name}[{ix}][{self.d.integer(0, n - 1)}, {self.d.integer(0, n - 1)}]", b)
        if form == 1:
            return E(f"{f.name}[{ix}].trace()", n * b)
        if form == 2:
            return E(f"{f.name}[{ix}].determinant()", math.factorial(n) * b ** n)
        vectors = [v for v in ctx.fields if v.kind == "vector" and v.dim == n]
        if vectors:
            v = self.d.choice(vectors)
            return E(f"({f.name}[{ix}] @ {v.name}[{self.index(ctx)}])[{self.d.integer(0, n - 1)}]",
                     n * b * v.bound)
        return E(f"({f.name}[{ix}] @ {f.name}[{ix}].transpose())[0, {n - 1}]", n * b * b)

    def atom(self, ctx: Ctx) -> E:
        form = self.d.integer(0, 9)
        if form <= 5 and ctx.fields:
            return _squash(self.read(ctx, self.d.choice(ctx.fields)))
        if form <= 7 and ctx.locals:
            name = self.d.choice(sorted(ctx.locals))
            return E(name, ctx.locals[name])
        if form == 8 and ctx.funcs:
            name, arity, bound = self.d.choice(list(ctx.funcs))
            self.features.add("func-call")
            inner = replace(ctx, funcs=())
            args = [_small(self.atom(inner), 3.0).text for _ in range(arity)]
            return E(f"{name}({', '.join(args)})", bound)
        if form == 9 and ctx.index:
            var = ctx.inner[0] if ctx.inner and self.d.chance(0.5) else ctx.index
            return E(f"(ti.cast({var}, fp) * {self.d.const(0.1, 0.5)})", 0.5 * self.n)
        return E(self.d.const(-2.0, 2.0), 2.0)

    # ---- statements ---------------------------------------------------------------------
    def locals_(self, ctx: Ctx, lines: list, pad: str, count: int) -> None:
        for _ in range(count):
            name = self.fresh("t")
            e = self.expr(ctx, self.d.integer(1, 3))
            lines.append(f"{pad}{name} = {e.text}")
            ctx.locals[name] = e.bound

    def if_block(self, ctx: Ctx, lines: list, pad: str) -> None:
        """A local assigned before an `if` and reassigned in its branches."""
        self.features.add("if")
        name = self.fresh("b")
        first = self.expr(ctx, 2)
        lines += [f"{pad}{name} = {first.text}", f"{pad}if {self.condition(ctx, 1)}:"]
        bound = first.bound
        for branch in range(1 + self.d.chance(0.5)):
            if branch:
                lines.append(f"{pad}else:")
            e = self.expr(ctx, 2)
            lines.append(f"{pad}    {name} = {e.text}")
            bound = max(bound, e.bound)
        ctx.locals[name] = bound

    def inner_loop(self, ctx: Ctx, lines: list, pad: str) -> None:
        """A serial loop (for, or while with a fixed trip count) carrying a local `s`, at times
        with a `break`."""
        s, j, trips = self.fresh("s"), self.fresh("j"), self.d.integer(1, self.n)
        lines.append(f"{pad}{s} = {_small(self.expr(ctx, 1), 2.0).text}")
        kind = self.d.choice(["for", "while"])
        self.features.add(f"loop:{kind}")
        if kind == "for":
            lines.append(f"{pad}for {j} in range({trips}):")
        else:
            lines += [f"{pad}{j} = 0", f"{pad}while {j} < {trips}:"]
        body = replace(ctx, locals={**ctx.locals, s: 2.0}, inner=(j, trips))
        if self.d.chance(0.5):       # contracting linear update: |s| stays <= 2
            e = _small(self.expr(body, 2), 1.0)
            update = [f"{pad}    {s} = {self.d.const(-0.5, 0.5)} * {s} + {e.text}"]
        else:
            e = _small(self.expr(body, 2), 2.0)
            update = [f"{pad}    {s} = ti.tanh({s} * {e.text} + {self.expr(body, 1).text})"]
        if kind == "while":
            update.append(f"{pad}    {j} += 1")
        if self.d.chance(0.15):      # a break at a fixed iteration or where s crosses a value
            self.features.add("break")
            cond = (f"{j} == {self.d.integer(0, trips - 1)}" if self.d.chance(0.5) else
                    f"{s} {self.d.choice(['<', '>'])} {self.d.const(-1.0, 1.0)}")
            stop = [f"{pad}    if {cond}:", f"{pad}        break"]
            update = stop + update if self.d.chance(0.5) else update + stop
        lines += update
        ctx.locals[s] = 2.0

    def store(self, ctx: Ctx, lines: list, pad: str, out: Fld) -> str:
        e = _squash(self.expr(ctx, self.d.integer(1, 4)))
        i = ctx.index
        form = self.d.choice(["=", "=", "+=", "scatter", "atomic_add", "atomic_sub",
                              "atomic_max", "atomic_min"])
        self.features.add(f"store:{form}")
        out.bound = e.bound
        if form in ("=", "+="):
            lines.append(f"{pad}{out.name}[{i}] {form} {e.text}")
            return form
        target = f"{out.name}[({self.d.integer(1, 3)} * {i} + {self.d.integer(0, self.n - 1)}) % N]"
        if form in ("atomic_max", "atomic_min"):
            lines.append(f"{pad}ti.{form}({target}, {e.text})")
            return form
        out.bound = e.bound * self.n
        lines.append(f"{pad}{target} += {e.text}" if form == "scatter"
                     else f"{pad}ti.{form}({target}, {e.text})")
        return form

    # ---- kernels ------------------------------------------------------------------------
    def kernel(self, header: list, body) -> str:
        name = self.fresh("k")
        lines = ["    @ti.kernel", f"    def {name}{header[0]}:"] + [f"        {h}" for h in header[1:]]
        body(lines, " " * 12)
        self.blocks.append("\n".join(lines))
        return name

    def readable(self) -> list:
        return [f for f in self.fields if f.role in ("param", "data") or f.written]

    def launch(self, kernel: str, args: str, source_fields: list, out: list) -> None:
        text = self.blocks[-1]
        reads = {f.name for f in source_fields if _mentions(text, f.name)}
        self.launches.append((kernel, args, reads, {f.name for f in out}))

    def new_field(self, kind: str, dim: int = 0) -> Fld:
        f = Fld(self.fresh({"scalar": "y", "vector": "yv", "matrix": "ym", "time": "st"}[kind]),
                kind, dim)
        f.written = False
        self.fields.append(f)
        return f

    def map_kernel(self, stencil: bool) -> None:
        self.features.add("kernel:stencil" if stencil else "kernel:map")
        sources, out = self.readable(), self.new_field("scalar")
        ctx = Ctx(list(sources), stencil=stencil, funcs=tuple(self.funcs))
        loop = ("for i in range(1, N - 1):" if stencil else
                self.d.choice(["for i in range(N):", f"for i in {self.params[0].name}:"]))

        forms = []

        def body(lines, pad):
            self.locals_(ctx, lines, pad, self.d.integer(0, 2))
            if self.d.chance(0.4):
                self.if_block(ctx, lines, pad)
            if self.d.chance(0.4):
                self.inner_loop(ctx, lines, pad)
            forms.append(self.store(ctx, lines, pad, out))
        name = self.kernel(["()", loop], body)
        out.written = True
        self.launch(name, "()", sources, [out])
        if forms[0] != "=" and self.d.chance(0.25):    # accumulating twice is clean
            self.features.add("launched-twice")
            out.bound *= 2
            self.launch(name, "()", sources, [out])

    def vector_kernel(self, matrix: bool) -> None:
        self.features.add("kernel:matrix" if matrix else "kernel:vector")
        n = self.d.integer(2, 3)
        sources = self.readable()
        out = self.new_field("matrix" if matrix else "vector", n)
        ctx = Ctx(list(sources), funcs=tuple(self.funcs))
        mats = [f for f in sources if f.kind == "matrix" and f.dim == n]

        def entries(count):
            return [_small(self.expr(ctx, 2), 2.0).text for _ in range(count)]

        def body(lines, pad):
            w = self.fresh("w")
            lines.append(f"{pad}{w} = ti.Vector([{', '.join(entries(n))}])")
            scale = _small(self.expr(ctx, 2), 2.0).text
            if matrix:
                a = self.fresh("A")
                rows = ", ".join(f"[{', '.join(entries(n))}]" for _ in range(n))
                lines.append(f"{pad}{a} = ti.Matrix([{rows}])")
                value = f"{a} @ {a}.transpose() * {scale}" + (
                    f" + {mats[0].name}[i] * {w}[0]" if mats else f" + {w}.outer_product({w})")
                out.bound = n * 4 * 2 + 2 * 2 * n
            else:
                value = f"{w} * {scale}" + (f" + {mats[0].name}[i] @ {w}" if mats else "")
                out.bound = 4 + n * 2
            lines.append(f"{pad}{out.name}[i] = {value}")
        name = self.kernel(["()", "for i in range(N):"], body)
        out.written = True
        self.launch(name, "()", sources, [out])

    def time_kernels(self) -> None:
        """st[0, i] from the inputs, then T steps, each writing row t + 1 from row t."""
        self.features.add("kernel:time")
        sources = self.readable()
        out = self.new_field("time")
        ctx = Ctx(list(sources), funcs=tuple(self.funcs))
        first = self.kernel(["()", "for i in range(N):"], lambda lines, pad: lines.append(
            f"{pad}{out.name}[0, i] = {_squash(self.expr(ctx, 3)).text}"))
        self.launch(first, "()", sources, [out])
        step_ctx = Ctx(list(sources) + [out], time_row="t", time_field=out.name,
                       funcs=tuple(self.funcs))

        def step(lines, pad):
            e = self.expr(step_ctx, 3)
            if not _mentions(e.text, out.name):
                e = E(f"{e.text} + {self.d.const(-0.9, 0.9)} * {out.name}[t, i]", e.bound + 8)
            lines.append(f"{pad}{out.name}[t + 1, i] = {_squash(e).text}")
        name = self.kernel(["(t: ti.i32)", "for i in range(N):"], step)
        out.written = True
        for t in range(self.steps):
            self.launch(name, f"({t},)", sources + [out], [out])

    def func(self) -> None:
        self.features.add("func")
        arity = self.d.integer(1, 2)
        args = ["a", "b"][:arity]
        ctx = Ctx([], locals={a: 3.0 for a in args}, index=None)
        name = self.fresh("f")
        lines = ["    @ti.func", f"    def {name}({', '.join(args)}):"]
        self.locals_(ctx, lines, " " * 8, self.d.integer(0, 1))
        e = _squash(self.expr(ctx, 3))
        lines.append(f"        return {e.text}")
        self.blocks.append("\n".join(lines))
        self.funcs.append((name, arity, e.bound))

    def loss_kernel(self, outputs: list) -> None:
        ctx = Ctx([], funcs=tuple(self.funcs))
        terms = []
        for f in outputs:
            ctx.fields = [f] + [p for p in self.params if self.d.chance(0.3)]
            e = self.expr(ctx, self.d.integer(0, 3))
            if not _mentions(e.text, f.name):
                e = E(f"{e.text} + {self.d.const(-1.0, 1.0)} * {_squash(self.read(ctx, f)).text}", 0)
            terms.append(e.text)
        accumulate = self.d.choice(["loss[None] += {}", "ti.atomic_add(loss[None], {})"])
        name = self.kernel(["()", "for i in range(N):"], lambda lines, pad: lines.append(
            pad + accumulate.format(" + ".join(terms))))
        self.launch(name, "()", outputs, [Fld("loss", "scalar")])

    # ---- the program --------------------------------------------------------------------
    def program(self) -> Program:
        d = self.d
        self.params = [Fld("x", "scalar", role="param")]
        if d.chance(0.5):
            self.params.append(Fld("v", "vector", d.integer(2, 3), role="param"))
        if d.chance(0.4):
            self.params.append(Fld("m", "matrix", d.integer(2, 3), role="param"))
        self.fields += self.params
        if d.chance(0.5):
            self.fields.append(Fld("wd", "scalar", role="data"))
        for _ in range(d.integer(0, 2)):
            self.func()
        for _ in range(d.integer(1, self.max_stages)):
            kind = d.choice(["map", "map", "stencil", "vector", "matrix", "time"])
            if kind in ("map", "stencil"):
                self.map_kernel(kind == "stencil")
            elif kind == "time":
                self.time_kernels()
            else:
                self.vector_kernel(kind == "matrix")
        state = [f for f in self.fields if f.role == "state"]
        outputs = [f for f in state if d.chance(0.85)] or [self.params[0]]
        if len(state) > len(outputs) - (outputs == [self.params[0]]):
            self.features.add("dead-output")
        split = d.integer(1, len(outputs)) if d.chance(0.3) else len(outputs)
        for part in (outputs[:split], outputs[split:]):
            if part:
                self.loss_kernel(part)
        manual = d.chance(0.5)
        self.features.add("manual" if manual else "tape")
        rounds = 2 if d.chance(0.3) else 1       # a second round after a gradient step
        if rounds == 2:
            self.features.add("two-rounds")
        self.shape = (state, manual, rounds)     # what plant.py renders again with a bug in
        return Program(self.source(state, manual, rounds), self.features)

    def sweep(self) -> list:
        """The adjoint launches in reverse order, with neighbours swapped at random where that
        is still a correct order: they do not depend on each other (two accumulations into
        the loss commute), or the one launched later writes only fields that do not reach the
        loss (its adjoint passes on zeros)."""
        live = {"loss"}
        for _, _, reads, writes in reversed(self.launches):
            if writes & live:
                live |= reads
        order = list(reversed(self.launches))
        for k in range(len(order) - 1):
            a, b = order[k], order[k + 1]          # a was launched after b
            independent = not ((a[3] - {"loss"}) & (b[2] | b[3])) and not (b[3] & a[2])
            if (independent or not (a[3] & live)) and self.d.chance(0.5):
                order[k], order[k + 1] = b, a
        if [x[:2] for x in order] != [x[:2] for x in reversed(self.launches)]:
            self.features.add("sweep-reordered")
        return order

    def source(self, state: list, manual: bool, rounds: int) -> str:
        decl = {"scalar": "ti.field(fp, shape=N, needs_grad=True)",
                "vector": "ti.Vector.field({dim}, fp, shape=N, needs_grad=True)",
                "matrix": "ti.Matrix.field({dim}, {dim}, fp, shape=N, needs_grad=True)",
                "time": "ti.field(fp, shape=(T + 1, N), needs_grad=True)"}
        lines = ["import tinyad as ti", "", f"N = {self.n}", f"T = {self.steps}", "", "",
                 "def build(fp):"]
        for f in self.fields:
            text = "ti.field(fp, shape=N)" if f.role == "data" else decl[f.kind].format(dim=f.dim)
            lines.append(f"    {f.name} = {text}")
        lines += ["    idx = ti.field(ti.i32, shape=N)",
                  "    loss = ti.field(fp, shape=(), needs_grad=True)", ""]
        lines += [block + "\n" for block in self.blocks]

        def calls(items):
            return "[" + ", ".join(f"({k}, {a})" for k, a, *_ in items) + "]"
        data = [f.name for f in self.fields if f.role == "data"]
        lines += [f"    return dict(params=[{', '.join(p.name for p in self.params)}],",
                  f"                data=[{', '.join(data)}], ints=[idx], loss=loss,",
                  f"                state=[{', '.join(f.name for f in state)}],",
                  f"                launches={calls(self.launches)},",
                  f"                sweep={calls(self.sweep()) if manual else None},",
                  f"                rounds={rounds})", ""]
        return "\n".join(lines)


def _mentions(text: str, name: str) -> bool:
    import re  # noqa: PLC0415
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


DIFFERENTIABLE_OPS = sorted(set(OPS) - NOT_DIFFERENTIABLE)


def generate(draw: Draw, small: bool = False) -> Program:
    return Generator(draw, small).program()


def generate_seeded(seed: int, small: bool = False) -> Program:
    program = generate(RandomDraw(seed), small)
    program.seed = seed
    return program
