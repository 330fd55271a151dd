"""The op table: every fact about a scalar operation, in one row keyed by its name.

A row gives the op's arity and typing kind; how it evaluates on numbers (`eval`, numpy) and on
sympy expressions (`sym`); its derivative (`partials`); how it is written (`infix`, `precedence`,
and the Python operator it comes from); and whether an f32 result is computed in f64 and rounded
once (`via_f64`). Consumers look an op up here (the typing rules in core/builder.py, the printer,
the interpreter's domains, reverse mode); the code writers keep their spellings in dicts keyed by
the same names (compile/op_spellings.py).

A derivative rule returns each argument's partial derivative as IR: `partials(args, out)` gives
d(out)/d(arg_k) for each k, or None where the partial is zero. Reverse mode multiplies by the
output adjoint (arg_bar += g * partial); forward mode sums partial * arg_dot. One rule, both modes.
A `jvp` column overrides the sum where the product form is wrong: a choice between operands
(select, min, max) passes the chosen operand's tangent, because 0 * arg_dot is NaN when the
operand not chosen has an infinite or NaN tangent (select(x > 0, sqrt(x), 0) at x = 0).
Where a partial's formula is inf or NaN at a point whose true derivative is finite, the rule
guards that point (pow at base 0). An op with `partials=None` is not differentiable (floor,
comparisons, ...): no gradient flows through it, as in Taichi.

How to add an op: add a row below, then its spelling to CPU_SPELLINGS (and CUDA_SPELLINGS when it
differs) in compile/op_spellings.py; tests/test_ops.py names any consumer that still lacks it.
(A function users call, `ti.<name>`, is one more line in frontend/math.py.)
"""
from __future__ import annotations

import ast
import functools
import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np

# (the builder imports this table back, when it types an op: the core's one import circle)
from tinyad.core import builder as B
from tinyad.core import ir

# Typing kinds (applied in tinyad/core/builder.py):
#   arith   operands promoted to one type, result of that type
#   float   like arith, but an integer operand first becomes default_fp (sin(1) is a float)
#   compare operands promoted, result i32 (0 or 1)
#   int     integer operands only (bit operations), result promoted
#   logic   operands are truth values, result i32
#   select  select(cond, a, b): a and b promoted, cond any type
#   cast    result type named by the node
#   random  no operands, float result

# Precedence levels, Python's own (higher binds tighter). `**` is the one level that groups from
# the right. Both the IR printer and the generated Python use them.
OR, AND, NOT, COMPARE, BIT_OR, BIT_XOR, BIT_AND, SHIFT, ADD, MUL, UNARY, POW, ATOM = range(1, 14)


@dataclass(frozen=True)
class OpSpec:
    name: str
    arity: int
    kind: str
    eval: Callable | None                # the op on numpy scalars (None: the domain's own form)
    sym: Callable | None = None          # the op on sympy expressions (imported lazily)
    partials: Callable | None = None     # (args, out) -> tuple of partial derivatives (IR)
    infix: str | None = None             # printed as `a + b` (or `-a`) rather than `add(a, b)`
    precedence: int = ATOM               # how tightly the infix form binds
    python: tuple | None = None          # (ast node, operator function) of its Python operator
    via_f64: bool = False                # f32: compute in f64, round once (as libm does)
    # Forward mode's rule where sum(partial * arg_dot) is wrong: (args, out, dots) -> tangent,
    # dots[k] None for an argument that carries no tangent. None: the product form.
    jvp: Callable | None = None

    @property
    def differentiable(self) -> bool:
        return self.partials is not None


def _sp():
    import sympy  # noqa: PLC0415  (sympy is only imported when symbolic checks run)
    return sympy


@functools.cache
def _sympy_mod():
    """a % b for sympy, with the derivatives sympy's Mod leaves unevaluated (d/db)."""
    sp = _sp()

    class mod(sp.Function):   # (lower case: printed as mod(a, b))
        @classmethod
        def eval(cls, a, b):
            if a.is_Number and b.is_Number:
                return sp.Mod(a, b)
            return None

        def fdiff(self, argindex=1):
            a, b = self.args
            return sp.Integer(1) if argindex == 1 else -sp.floor(a / b)

        def _eval_rewrite_as_Mod(self, a, b, **kwargs):
            return sp.Mod(a, b)
    return mod


def _select(cond, a, b):
    return a if cond else b


def _identity(value):
    return value


def _pow_partials(args, out):
    """d(x**y)/dx = y * x**(y-1), d/dy = log(x) * x**y. Guarded where the formula is NaN but
    the derivative is 0: at y == 0 (x**0 is constant; the formula is 0 * 0**-1 at x = 0), and
    where x**y is 0 (x = 0, y > 0: the formula is log(0) * 0; sympy's limit is 0)."""
    base, exponent = args
    if isinstance(exponent, ir.Const) and exponent.value in (1, 2):
        # x ** 1 and x ** 2 (as in w = 0.5 * (1.5 - fx) ** 2): no pow call in the derivative
        d_base = 1 if exponent.value == 1 else exponent * base
    else:
        d_base = _zero_where(B.binary("eq", exponent, 0), exponent * base ** (exponent - 1))
    zero_output = B.binary("eq", out, 0) if _may_be_zero(base) else False
    d_exponent = _zero_where(zero_output, B.unary("log", base) * out)
    return d_base, d_exponent


def _may_be_zero(value) -> bool:
    value = value.value if isinstance(value, ir.Const) else value
    return B.is_expr(value) or value == 0


def _zero_where(cond, partial):
    """`partial`, but 0 where `cond` holds. A condition known now is decided now, so `x ** 2.0`
    gets no guard (and a zero partial is None, as the rules' contract says)."""
    if isinstance(cond, ir.Const):
        cond = cond.value
    if not B.is_expr(cond):
        return None if cond else partial
    return B.select(cond, 0, partial)


def _ordered_not_equal(a, b):
    """a != b, false where a or b is NaN (LLVM's `fcmp one`, Taichi's `!=`)."""
    return np.less(a, b) | np.greater(a, b)


def _min_partials(args, out):
    first = args[0] <= args[1]
    return B.select(first, 1.0, 0.0), B.select(first, 0.0, 1.0)


def _max_partials(args, out):
    first = args[0] >= args[1]
    return B.select(first, 1.0, 0.0), B.select(first, 0.0, 1.0)


def _choice_jvp(first):
    """The tangent of an op that returns one of two operands: the chosen operand's tangent."""
    def jvp(args, out, dots):
        a_dot, b_dot = (0.0 if d is None else d for d in dots[-2:])
        return B.select(first(args), a_dot, b_dot)
    return jvp


def _truediv_jvp(args, out, dots):
    """(a_dot - out * b_dot) / b: one division (the product form, a_dot / b - out / b * b_dot,
    has two). A constant divisor keeps the product form, whose 1 / b folds to a constant."""
    a, b = args
    a_dot, b_dot = dots
    if b_dot is None and isinstance(b, ir.Const):
        return B.binary("mul", 1 / b, a_dot)
    if b_dot is None:
        return B.binary("truediv", a_dot, b)
    drift = B.binary("mul", out, b_dot)
    numerator = B.unary("neg", drift) if a_dot is None else B.binary("sub", a_dot, drift)
    return B.binary("truediv", numerator, b)


def _atan2_partials(args, out):
    y, x = args
    radius2 = y * y + x * x
    return x / radius2, -y / radius2


def _infix(symbol, precedence, node, function):
    """The columns of an op written as a Python operator."""
    return {"infix": symbol, "precedence": precedence, "python": (node, function)}


_TABLE: list[OpSpec] = [
    # arithmetic
    OpSpec("add", 2, "arith", np.add, lambda a, b: a + b,
           partials=lambda args, out: (1, 1), **_infix("+", ADD, ast.Add, operator.add)),
    OpSpec("sub", 2, "arith", np.subtract, lambda a, b: a - b,
           partials=lambda args, out: (1, -1), **_infix("-", ADD, ast.Sub, operator.sub)),
    OpSpec("mul", 2, "arith", np.multiply, lambda a, b: a * b,
           partials=lambda args, out: (args[1], args[0]),
           **_infix("*", MUL, ast.Mult, operator.mul)),
    OpSpec("truediv", 2, "float", np.true_divide, lambda a, b: a / b,
           partials=lambda args, out: (1 / args[1], -out / args[1]), jvp=_truediv_jvp,
           **_infix("/", MUL, ast.Div, operator.truediv)),
    OpSpec("floordiv", 2, "arith", np.floor_divide,
           **_infix("//", MUL, ast.FloorDiv, operator.floordiv)),
    # a % b = a - floor(a / b) * b, as Taichi lowers it (its floordiv passes no gradient):
    # d/da = 1, d/db = -floor(a / b)
    OpSpec("mod", 2, "arith", np.mod, lambda a, b: _sympy_mod()(a, b),
           partials=lambda args, out: (1, -B.unary("floor", args[0] / args[1])),
           **_infix("%", MUL, ast.Mod, operator.mod)),
    OpSpec("pow", 2, "arith", np.power, lambda a, b: a ** b, partials=_pow_partials,
           via_f64=True, **_infix("**", POW, ast.Pow, operator.pow)),
    OpSpec("neg", 1, "arith", np.negative, lambda a: -a,
           partials=lambda args, out: (-1,), infix="-", precedence=UNARY),
    # d|a|/da = sign(a), 0 at a = 0 as in Taichi (and sympy's sign)
    OpSpec("abs", 1, "arith", np.abs, lambda a: _sp().Abs(a),
           partials=lambda args, out: (B.select(args[0] > 0, 1.0,
                                                 B.select(args[0] < 0, -1.0, 0.0)),)),
    # a NaN operand is dropped (C's fmin/fmax), as Taichi's min/max and its atomics do
    OpSpec("min", 2, "arith", np.fmin, lambda a, b: _sp().Min(a, b), partials=_min_partials,
           jvp=_choice_jvp(lambda args: args[0] <= args[1])),
    OpSpec("max", 2, "arith", np.fmax, lambda a, b: _sp().Max(a, b), partials=_max_partials,
           jvp=_choice_jvp(lambda args: args[0] >= args[1])),
    # transcendental
    OpSpec("sin", 1, "float", np.sin, lambda a: _sp().sin(a), via_f64=True,
           partials=lambda args, out: (B.unary("cos", args[0]),)),
    OpSpec("cos", 1, "float", np.cos, lambda a: _sp().cos(a), via_f64=True,
           partials=lambda args, out: (-B.unary("sin", args[0]),)),
    OpSpec("tan", 1, "float", np.tan, lambda a: _sp().tan(a), via_f64=True,
           partials=lambda args, out: (1 + out * out,)),
    OpSpec("asin", 1, "float", np.arcsin, lambda a: _sp().asin(a), via_f64=True,
           partials=lambda args, out: (B.unary("rsqrt", 1 - args[0] * args[0]),)),
    OpSpec("acos", 1, "float", np.arccos, lambda a: _sp().acos(a), via_f64=True,
           partials=lambda args, out: (-B.unary("rsqrt", 1 - args[0] * args[0]),)),
    OpSpec("atan", 1, "float", np.arctan, lambda a: _sp().atan(a), via_f64=True,
           partials=lambda args, out: (1 / (1 + args[0] * args[0]),)),
    OpSpec("atan2", 2, "float", np.arctan2, lambda a, b: _sp().atan2(a, b), via_f64=True,
           partials=_atan2_partials),
    OpSpec("tanh", 1, "float", np.tanh, lambda a: _sp().tanh(a), via_f64=True,
           partials=lambda args, out: (1 - out * out,)),
    OpSpec("exp", 1, "float", np.exp, lambda a: _sp().exp(a), via_f64=True,
           partials=lambda args, out: (out,)),
    OpSpec("log", 1, "float", np.log, lambda a: _sp().log(a), via_f64=True,
           partials=lambda args, out: (1 / args[0],)),
    OpSpec("sqrt", 1, "float", np.sqrt, lambda a: _sp().sqrt(a),
           partials=lambda args, out: (0.5 / out,)),
    OpSpec("rsqrt", 1, "float", lambda a: 1 / np.sqrt(a), lambda a: 1 / _sp().sqrt(a),
           partials=lambda args, out: (-0.5 * out * out * out,)),
    # not differentiable: no gradient flows through these (as in Taichi). Their sympy forms are
    # the symbolic domain's (interp/symbolic.py), which gives floor a zero derivative.
    OpSpec("floor", 1, "arith", np.floor),
    OpSpec("ceil", 1, "arith", np.ceil),
    OpSpec("round", 1, "arith", np.round),   # half to even, like rint
    OpSpec("lt", 2, "compare", np.less, lambda a, b: _sp().Lt(a, b),
           **_infix("<", COMPARE, ast.Lt, operator.lt)),
    OpSpec("le", 2, "compare", np.less_equal, lambda a, b: _sp().Le(a, b),
           **_infix("<=", COMPARE, ast.LtE, operator.le)),
    OpSpec("gt", 2, "compare", np.greater, lambda a, b: _sp().Gt(a, b),
           **_infix(">", COMPARE, ast.Gt, operator.gt)),
    OpSpec("ge", 2, "compare", np.greater_equal, lambda a, b: _sp().Ge(a, b),
           **_infix(">=", COMPARE, ast.GtE, operator.ge)),
    OpSpec("eq", 2, "compare", np.equal, lambda a, b: _sp().Eq(a, b),
           **_infix("==", COMPARE, ast.Eq, operator.eq)),
    # ordered, as Taichi's: false when either side is NaN, like every other comparison
    OpSpec("ne", 2, "compare", _ordered_not_equal, lambda a, b: _sp().Ne(a, b),
           **_infix("!=", COMPARE, ast.NotEq, operator.ne)),
    # logic: the symbolic domain passes sympy truth values to `sym`
    OpSpec("and", 2, "logic", lambda a, b: np.int32(bool(a) and bool(b)),
           lambda a, b: _sp().And(a, b), infix="and", precedence=AND),
    OpSpec("or", 2, "logic", lambda a, b: np.int32(bool(a) or bool(b)),
           lambda a, b: _sp().Or(a, b), infix="or", precedence=OR),
    OpSpec("not", 1, "logic", lambda a: np.int32(not a), lambda a: _sp().Not(a)),
    # bit operations: integers only, no formula
    OpSpec("bit_and", 2, "int", np.bitwise_and, **_infix("&", BIT_AND, ast.BitAnd, operator.and_)),
    OpSpec("bit_or", 2, "int", np.bitwise_or, **_infix("|", BIT_OR, ast.BitOr, operator.or_)),
    OpSpec("bit_xor", 2, "int", np.bitwise_xor, **_infix("^", BIT_XOR, ast.BitXor, operator.xor)),
    OpSpec("shl", 2, "int", np.left_shift, **_infix("<<", SHIFT, ast.LShift, operator.lshift)),
    OpSpec("shr", 2, "int", np.right_shift, **_infix(">>", SHIFT, ast.RShift, operator.rshift)),
    OpSpec("bit_not", 1, "int", np.invert),
    # structure: the interpreter's domains and the code writers give each its own form
    OpSpec("select", 3, "select", _select,
           partials=lambda args, out: (None, B.select(args[0], 1.0, 0.0),
                                       B.select(args[0], 0.0, 1.0)),
           jvp=_choice_jvp(lambda args: args[0])),
    OpSpec("cast", 1, "cast", _identity,            # the result type is the node's dtype
           partials=lambda args, out: (1,)),         # float<->float only: cast_keeps_gradient
    OpSpec("stop_grad", 1, "arith", _identity),     # identity that blocks gradients
    OpSpec("random", 0, "random", None),
]

TABLE: dict[str, OpSpec] = {spec.name: spec for spec in _TABLE}

# Python's binary operators and comparisons -> (op name, the operator on Python values).
PYTHON_OPERATORS: dict[type, tuple[str, Callable]] = {
    spec.python[0]: (spec.name, spec.python[1]) for spec in _TABLE if spec.python}


def dunder_operators():
    """(dunder name, op name, reflected) for the operators traced values overload: the binary
    operators both ways round, and the orderings (Python reflects those by swapping them).
    `==` and `!=` stay Python's: expressions are hashed and compared by identity."""
    for spec in _TABLE:
        if not spec.python or spec.name in ("eq", "ne"):
            continue
        stem = spec.python[1].__name__.rstrip("_")     # operator.and_ -> "and"
        yield f"__{stem}__", spec.name, False
        if spec.kind != "compare":
            yield f"__r{stem}__", spec.name, True


def cast_keeps_gradient(to, source) -> bool:
    """`ti.cast` between float types passes the gradient; to or from an integer type stops it."""
    return to.is_float and source.is_float


# ---- Python's operators on expressions ---------------------------------------------------------

def _operator(name: str, reflected: bool = False):
    """An arithmetic dunder that builds an IR op (typing rules in core/builder.py). With a
    vector or matrix on the other side it returns NotImplemented, so Python asks the matrix."""
    def method(self, other):
        if getattr(other, "is_tinyad_matrix", False):
            return NotImplemented
        return B.binary(name, other, self) if reflected else B.binary(name, self, other)
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _negative(self):
    return B.unary("neg", self)


def _absolute(self):
    return B.unary("abs", self)


def _install_operators():
    """Give expressions (ir.Expr) the Python operators this table names, typed by the builder.
    Done here: ir.py builds on nothing above it, and the builder reads this table when it types
    an op, so of the two this module is loaded last."""
    for dunder, name, reflected in dunder_operators():
        setattr(ir.Expr, dunder, _operator(name, reflected))
    ir.Expr.__neg__, ir.Expr.__abs__ = _negative, _absolute


_install_operators()
