# %% [markdown]
# # Lesson 13: derivatives of functions inside kernels, and second order
#
# Taichi issue #5055 (seed 002) wishes for JAX's `grad(f)` of a `ti.func`. Its stand-in
# today: put f in a kernel that adds into a field, seed `y.grad`, call `f.grad()`, read
# `x.grad`. For f(x) = x^3 + 2x^2 - 3x + 1, f'(1) = 4 and f'(2) = 17. Without checks:

# %%
import numpy as np
import sympy

import tinyad as ti

ti.init(check="off")
x = ti.field(float, shape=(), needs_grad=True)
y = ti.field(float, shape=(), needs_grad=True)


@ti.kernel
def f_kernel():
    y[None] += x[None] ** 3 + 2 * x[None] ** 2 - 3 * x[None] + 1


def dfdx_by_kernel(value):
    x[None] = value
    y.grad[None] = 1.0
    f_kernel.grad()
    return x.grad[None]


print("f'(1) =", dfdx_by_kernel(1.0))
print("f'(1) =", dfdx_by_kernel(1.0), " (again: x.grad accumulates)")
print("f'(2) =", dfdx_by_kernel(2.0), " (the truth is 17)")

# %% [markdown]
# ## What tinyad says
#
# Gradients accumulate (`+=`) into `x.grad`, as in Taichi: the second call adds 4 to 4. At
# the same x that may be what you meant (summing over rounds); at a new x it cannot be, and
# tinyad stops there:

# %%
ti.init()
x = ti.field(float, shape=(), needs_grad=True)
y = ti.field(float, shape=(), needs_grad=True)
try:
    dfdx_by_kernel(1.0)
    dfdx_by_kernel(2.0)
except ti.AutodiffRuleError as error:
    print(error)

# %% [markdown]
# ## The fix: `ti.ad.grad(f)`, a function a kernel calls
#
# `ti.ad.grad(f)` is f's derivative as a func: no fields, nothing to seed or clear, and it
# can be differentiated again. sympy gives the truth.

# %%
@ti.func
def f(v):
    return v ** 3 + 2 * v ** 2 - 3 * v + 1


dfdx = ti.ad.grad(f)
d2fdx2 = ti.ad.grad(ti.ad.grad(f))
points = ti.field(float, shape=4)
first = ti.field(float, shape=4)
second = ti.field(float, shape=4)


@ti.kernel
def derivatives():
    for i in range(4):
        first[i] = dfdx(points[i])
        second[i] = d2fdx2(points[i])


points.from_numpy(np.array([-1.0, 0.0, 1.0, 2.0]))
derivatives()
s = sympy.Symbol("s")
f_sym = s ** 3 + 2 * s ** 2 - 3 * s + 1
truth_first = [float(sympy.diff(f_sym, s).subs(s, p))
               for p in points.to_numpy()]
truth_second = [float(sympy.diff(f_sym, s, 2).subs(s, p))
                for p in points.to_numpy()]
print("f'  =", first.to_numpy(), " sympy:", truth_first)
print("f'' =", second.to_numpy(), " sympy:", truth_second)

# %% [markdown]
# ## jvp and vjp: a column and a row, for vector functions
#
# For g(p) = (p0 p1, sin p0), `ti.ad.jvp(g)(p, v)` returns (g(p), J v) and `ti.ad.vjp(g)(p,
# u)` returns (g(p), J^T u), as in JAX. J v is forward mode (lesson 12's column), J^T u the
# row side.

# %%
@ti.func
def g(p):
    return ti.Vector([p[0] * p[1], ti.sin(p[0])])


jv = ti.Vector.field(2, float, shape=())
jtu = ti.Vector.field(2, float, shape=())


@ti.kernel
def products(p: ti.types.vector(2, float)):
    _, jv[None] = ti.ad.jvp(g)(p, ti.Vector([1.0, 2.0]))
    _, jtu[None] = ti.ad.vjp(g)(p, ti.Vector([3.0, 4.0]))


products(ti.Vector([0.5, 1.5]))
p0, p1 = sympy.symbols("p0 p1")
g_sym = sympy.Matrix([p0 * p1, sympy.sin(p0)])
J = g_sym.jacobian([p0, p1]).subs({p0: 0.5, p1: 1.5})
print("J v   =", jv[None].to_numpy(),
      " sympy:", list(J * sympy.Matrix([1, 2])))
print("J^T u =", jtu[None].to_numpy(),
      " sympy:", list(J.T * sympy.Matrix([3, 4])))

# %% [markdown]
# ## Second order: forward over reverse
#
# A Tape inside a FwdMode runs the adjoint kernels' tangent variants: the gradient's tangent
# lands in `w.grad.dual`, which is H v, the Hessian times the seed. Fields between the param
# and the loss need both `needs_grad` and `needs_dual`. `ti.ad.hvp` wraps the same.
# L(w) = sum_i w_i^2 w_(i+1) + sin w_i, checked against sympy's Hessian.

# %%
m = 4
w = ti.field(ti.f64, shape=m, needs_grad=True, needs_dual=True)
L = ti.field(ti.f64, shape=(), needs_grad=True, needs_dual=True)


@ti.kernel
def compute_L():
    for i in range(m - 1):
        L[None] += w[i] ** 2 * w[i + 1]
    for i in range(m):
        L[None] += ti.sin(w[i])


w.from_numpy(np.array([0.3, -0.7, 1.1, 0.5]))
v = [1.0, 0.0, -1.0, 2.0]
with ti.ad.FwdMode(loss=w.grad, param=w, seed=v):
    with ti.ad.Tape(loss=L):
        compute_L()
print("w.grad.dual  =", w.grad.dual.to_numpy())
hv = ti.ad.hvp(compute_L, L, w, np.array(v))
print("ti.ad.hvp    =", hv)

ws = sympy.symbols("w0:4")
L_sym = (sum(ws[i] ** 2 * ws[i + 1] for i in range(m - 1))
         + sum(sympy.sin(wi) for wi in ws))
H = sympy.hessian(L_sym, ws).subs(dict(zip(ws, w.to_numpy())))
hv_truth = np.array(H * sympy.Matrix(v), dtype=float).ravel()
print("sympy H v    =", hv_truth)
