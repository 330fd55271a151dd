# expect: TinyadSyntaxError: ti.random
import tinyad as ti

x = ti.field(ti.f32, shape=4)

import numpy as np


@ti.kernel
def k():
    for i in x:
        x[i] = np.random.uniform()  # <- error

k()
