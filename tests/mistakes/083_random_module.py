# expect: TinyadSyntaxError: random.random
import tinyad as ti

x = ti.field(ti.f32, shape=4)

import random


@ti.kernel
def k():
    for i in x:
        x[i] = random.random()  # <- error

k()
