# expect: TinyadIndexError: has 1 dimension
import tinyad as ti

x = ti.field(ti.f32, shape=4)

x[1, 2] = 3.0  # <- error
