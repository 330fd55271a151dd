# expect: TinyadTypeError: astype
import tinyad as ti

import numpy as np

n = ti.field(ti.i32, shape=3)
n.from_numpy(np.zeros(3))  # <- error
