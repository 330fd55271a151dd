# expect: TinyadRuntimeError: integer division by zero
# modes: fast-debug
import tinyad as ti

n = ti.field(ti.i32, shape=4)


@ti.kernel
def k(d: ti.i32):
    for i in n:
        n[i] = i // d  # <- error

k(0)
