# expect: TinyadTypeError: field v has shape (3, 2)
import numpy as np

import tinyad as ti

v = ti.Vector.field(2, ti.f32, shape=3)
v.from_numpy(np.zeros(3))  # <- error
