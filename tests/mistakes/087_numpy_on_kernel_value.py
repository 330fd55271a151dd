# expect: TinyadTypeError: use ti.exp
import tinyad as ti

x = ti.field(ti.f32, shape=4)

import numpy as np


@ti.kernel
def k():
    for i in x:
        x[i] = np.exp(x[i])  # <- error

k()
