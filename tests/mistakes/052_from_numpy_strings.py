# expect: TinyadTypeError: not numeric
import tinyad as ti

x = ti.field(ti.f32, shape=4)

import numpy as np

x.from_numpy(np.array(["a", "b", "c", "d"]))  # <- error
