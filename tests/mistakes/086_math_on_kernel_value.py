# expect: TinyadTypeError: use ti.sin
import tinyad as ti

x = ti.field(ti.f32, shape=4)

import math


@ti.kernel
def k():
    for i in x:
        x[i] = math.sin(x[i])  # <- error

k()
