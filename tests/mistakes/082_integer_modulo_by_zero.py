# expect: TinyadRuntimeError: integer division by zero
# modes: fast-debug
import tinyad as ti

n = ti.field(ti.i32, shape=4)


@ti.kernel
def k():
    for i in n:
        n[i] = 7 % (i - i)  # <- error

k()
