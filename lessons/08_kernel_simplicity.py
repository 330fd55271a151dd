# %% [markdown]
# # Lesson 8: the Kernel Simplicity Rule and ti.static unrolling
#
# Old Taichi docs required every differentiable kernel to be "simply nested for-loops": each
# loop holds exactly one loop or only statements. Taichi 1.7 relaxed that (inner loops are
# reversed, locals changed in them are saved on a stack), but still refuses a kernel that mixes
# a top-level loop with top-level statements. tinyad differentiates all four of the docs'
# shapes; each gradient below is checked against sympy.

# %%
import tinyad as ti

ti.init(default_fp=ti.f64)
x = ti.field(ti.f64, shape=4, needs_grad=True)
loss = ti.field(ti.f64, shape=(), needs_grad=True)
for i in range(4):
    x[i] = 0.5 + i


@ti.kernel
def task3():
    # "Bad" in the old rule: the outer loop contains two loops
    for i in range(2):
        for j in range(2):
            loss[None] += x[j] * x[i]
        for j in range(2):
            loss[None] += ti.sin(x[j + 2])


@ti.kernel
def task4():
    # "Bad" in Taichi 1.7 too: a statement beside a loop at the top level
    loss[None] += x[0]
    for i in range(4):
        loss[None] += x[i] ** 2


for kernel in (task3, task4):
    report = ti.ad.verify(kernel, loss, [x])
    print(kernel.__name__, x.grad.to_numpy(), "-", report.headline())

# %% [markdown]
# ## ti.static unrolls a loop at trace time
#
# The docs' workaround: `for j in ti.static(range(2))` is unrolled by the frontend, so it is
# no loop at all in the IR. Compare the IR of the unrolled kernel: the inner loops are gone,
# replaced by one statement per j.

# %%
from tinyad.explain import show


@ti.kernel
def task3_static():
    for i in range(2):
        for j in ti.static(range(2)):
            loss[None] += x[j] * x[i]
        for j in ti.static(range(2)):
            loss[None] += ti.sin(x[j + 2])


show(task3_static)
print(ti.ad.verify(task3_static, loss, [x]).headline())

# %% [markdown]
# What tinyad does refuse: a `break` out of the outermost (parallel) loop, whose iterations
# have no order. The error names the rule, the line, and the way out.

# %%
@ti.kernel
def with_break():
    for i in range(4):
        if x[i] > 2:
            break
        loss[None] += x[i]


try:
    with_break()
except ti.TinyadError as error:
    print(type(error).__name__, error)
