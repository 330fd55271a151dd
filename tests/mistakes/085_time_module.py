# expect: TinyadSyntaxError: time.time
import tinyad as ti

x = ti.field(ti.f32, shape=4)

import time


@ti.kernel
def k():
    x[0] = time.time()  # <- error

k()
