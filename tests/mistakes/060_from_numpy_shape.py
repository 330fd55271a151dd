# expect: TinyadTypeError: the array has shape (2, 3)
import numpy as np

import tinyad as ti

a = ti.field(ti.f32, shape=(3, 2))
a.from_numpy(np.zeros((2, 3)))  # <- error
