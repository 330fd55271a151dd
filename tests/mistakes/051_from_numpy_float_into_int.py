# expect: TinyadTypeError: astype
import numpy as np

import tinyad as ti

n = ti.field(ti.i32, shape=3)
n.from_numpy(np.zeros(3))  # <- error
