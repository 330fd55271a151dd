# %% [markdown]
# # Lesson 9: custom gradients with grad_replaced and grad_for
#
# Sometimes you want to give the gradient yourself: a more stable formula, or a cheaper one.
# `@ti.ad.grad_replaced` marks a Python function that launches kernels; `@ti.ad.grad_for(it)`
# gives the function the Tape runs instead of their adjoints. The docs' example: forward runs
# `func` twice (adding 2 * mul * x to total), but the custom gradient runs `func.grad` once.

# %%
import tinyad as ti

ti.init()
x = ti.field(ti.f32)
total = ti.field(ti.f32)
n = 128
ti.root.dense(ti.i, n).place(x)
ti.root.place(total)
ti.root.lazy_grad()


@ti.kernel
def func(mul: ti.f32):
    for i in range(n):
        ti.atomic_add(total[None], x[i] * mul)


@ti.ad.grad_replaced
def forward(mul):
    func(mul)
    func(mul)


@ti.ad.grad_for(forward)
def backward(mul):
    func.grad(mul)


try:
    with ti.ad.Tape(loss=total):
        forward(4)
except ti.CustomGradientRuleError as error:
    print(error.report.summary)

# %% [markdown]
# tinyad checks a custom gradient the first time each line calls it under a Tape: along a
# random direction, finite differences of `forward` against what `backward` gives. They
# disagree, so the Tape stops (and puts every field back). The docs mean the half gradient
# here; `check=False` on the pair says so, and the Tape runs as in Taichi.

# %%
ti.ad.grad_for(forward, check=False)(backward)
with ti.ad.Tape(loss=total):
    forward(4)
print("x.grad[0] =", x.grad[0], " (the custom gradient 4; the true one 8)")

# %% [markdown]
# `ti.ad.verify` compares the whole gradient: it differentiates what `forward` really
# computes and reports the disagreement element by element.

# %%
try:
    ti.ad.verify(lambda: forward(4), total, [x])
except ti.GradientMismatchError as error:
    print(error.report.headline())
    worst = error.report.worst(1)[0]
    print(worst.name, "autodiff", worst.autodiff, "sympy", worst.truth)

# %% [markdown]
# ## A custom gradient that agrees
#
# Here the gradient is hand-written: d total / d x_i = 2 * mul, accumulated (`+=`) into
# `x.grad`, times the incoming `total.grad`. verify passes.

# %%
@ti.kernel
def func_grad_by_hand(mul: ti.f32):
    for i in range(n):
        x.grad[i] += 2 * mul * total.grad[None]


@ti.ad.grad_replaced
def forward_twice(mul):
    func(mul)
    func(mul)


@ti.ad.grad_for(forward_twice)
def backward_by_hand(mul):
    func_grad_by_hand(mul)


print(ti.ad.verify(lambda: forward_twice(4), total, [x]).headline())
print("x.grad[0] =", x.grad[0])
