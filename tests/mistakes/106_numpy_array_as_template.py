# expect: TinyadTypeError: a numpy array passed as ti.template()
import numpy as np

import tinyad as ti


@ti.kernel
def total(a: ti.template()) -> ti.f32:
    s = 0.0
    for i in range(3):
        s += a[i]  # <- error
    return s


total(np.ones(3, np.float32))
