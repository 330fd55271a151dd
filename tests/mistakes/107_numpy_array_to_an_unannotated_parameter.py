# expect: TinyadSyntaxError: needs a type annotation
import numpy as np

import tinyad as ti


@ti.kernel
def first(a) -> ti.f32:  # <- error
    return a[0]


first(np.ones(3, np.float32))
