"""tinyad: Taichi-style differentiable programming you can see inside.

`import tinyad as ti` runs Taichi autodiff programs. The public API is re-exported here.
"""
from tinyad import ad, algorithms, simt
from tinyad.ad import Tape
from tinyad.capture import capture
from tinyad.check.rules import (
    CustomGradientRuleError,
    NonFiniteGradientError,
    ParallelConflictRuleError,
    ReadDuringAccumulationRuleError,
    ReadThenOverwriteRuleError,
    ReplayDivergenceRuleError,
    SecondWriteRuleError,
    SilentZeroRuleError,
    StaleGradientRuleError,
)
from tinyad.colors import hex_to_rgb, rgb_to_hex
from tinyad.core.errors import (
    AutodiffRuleError,
    GradientMismatchError,
    KernelSimplicityRuleError,
    NonDifferentiableWarning,
    TinyadAssertionError,
    TinyadAttributeError,
    TinyadError,
    TinyadIndexError,
    TinyadInternalError,
    TinyadRuntimeError,
    TinyadSyntaxError,
    TinyadTypeError,
    TinyadValueError,
)
from tinyad.core.types import f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from tinyad.field import Axis, Field, SNode, axes, field, root, var
from tinyad.frontend import math
from tinyad.frontend.lang import (
    atomic_add,
    atomic_and,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_sub,
    atomic_xor,
    bit_shr,
    block_local,
    cast,
    grouped,
    loop_config,
    ndrange,
    one,
    random,
    raw_div,
    raw_mod,
    select,
    static,
    static_assert,
    stop_grad,
    template,
    types,
    zero,
)
from tinyad.frontend.math import (
    abs,
    acos,
    asin,
    atan2,
    ceil,
    cos,
    exp,
    floor,
    log,
    max,
    min,
    pow,
    randn,
    round,
    rsqrt,
    sin,
    sqrt,
    tan,
    tanh,
)
from tinyad.frontend.matrix import Matrix, Vector
from tinyad.frontend.structs import Struct, dataclass
from tinyad.funcs import func, real_func
from tinyad.kernel import data_oriented, kernel
from tinyad.ndarray import Ndarray, ndarray
from tinyad.runtime import init, reset, sync
from tinyad.structfield import StructField

__version__ = "0.1.0"

# Errors and warnings print as tinyad.<Name>, the name users catch them by, rather than by the
# layer that defines them (tinyad.core.errors, tinyad.check.rules).
for _error in (CustomGradientRuleError, NonFiniteGradientError, ParallelConflictRuleError,
               ReadDuringAccumulationRuleError, ReadThenOverwriteRuleError,
               ReplayDivergenceRuleError, SecondWriteRuleError,
               SilentZeroRuleError, StaleGradientRuleError, AutodiffRuleError,
               GradientMismatchError, KernelSimplicityRuleError, NonDifferentiableWarning,
               TinyadError, TinyadIndexError, TinyadRuntimeError, TinyadSyntaxError,
               TinyadTypeError, TinyadAssertionError, TinyadAttributeError, TinyadInternalError,
               TinyadValueError):
    _error.__module__ = "tinyad"

# Taichi's exception names, so that Taichi programs' `except` clauses catch tinyad's errors.
# TaichiCompilationError is every tinyad error: tinyad raises most of them while tracing.
TaichiCompilationError = TinyadError
TaichiSyntaxError, TaichiNameError = TinyadSyntaxError, TinyadSyntaxError
TaichiTypeError, TaichiIndexError = TinyadTypeError, TinyadIndexError
TaichiRuntimeError, TaichiAssertionError = TinyadRuntimeError, TinyadAssertionError

float32, float64, int32, int64, uint8 = f32, f64, i32, i64, u8
int8, int16, uint16, uint32, uint64 = i8, i16, u16, u32, u64
cpu, x64, arm64 = "cpu", "cpu", "cpu"
# Taichi's GPU archs: fast mode runs CUDA where a GPU is found, else the CPU (and says so)
gpu, cuda, vulkan, metal, opengl = "cuda", "cuda", "cuda", "cuda", "cuda"
dx11, dx12, gles, amdgpu = "cuda", "cuda", "cuda", "cuda"
i, j, k, l = Axis("i"), Axis("j"), Axis("k"), Axis("l")  # noqa: E741  (Taichi's names)
ij, ik, jk, ijk, ijkl = Axis("ij"), Axis("ik"), Axis("jk"), Axis("ijk"), Axis("ijkl")

# Taichi's older names, still in programs written for it (PlasticineLab, ChainQueen, the
# DiffTaichi of its paper): a function with a hand-written gradient, and an external array.
complex_kernel, complex_kernel_grad = ad.grad_replaced, ad.grad_for


def ext_arr():
    """`x: ti.ext_arr()`: the old spelling of `x: ti.types.ndarray()`."""
    return types.ndarray()


def any_arr(**options):
    """`x: ti.any_arr(element_dim=1)`: the old spelling of `ti.types.ndarray(...)`."""
    return types.ndarray(**options)


def polar_decompose(A, dt=None):
    from tinyad.frontend.linalg import polar_decompose as impl  # noqa: PLC0415
    return impl(A, dt)


def svd(A, dt=None):
    from tinyad.frontend.linalg import svd as impl  # noqa: PLC0415
    return impl(A, dt)


from tinyad import excepthook as _excepthook  # noqa: E402

_excepthook.install()     # a tinyad error's traceback: the user's frames only

__all__ = [name for name in dir() if not name.startswith("_")]


def __getattr__(name: str):
    """`ti.feild`: say what was probably meant, or which Taichi feature tinyad leaves out."""
    if name.startswith("__"):
        raise AttributeError(name)
    from tinyad.unknown_names import LEFT_OUT, NAMEABLE, LeftOutName, unknown_name  # noqa: PLC0415
    if name in NAMEABLE:     # ti.ui.Window in an annotation: an error only when called
        return LeftOutName(f"ti.{name}", LEFT_OUT[name])
    raise unknown_name(name, globals())
