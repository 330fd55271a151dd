# expect: TinyadIndexError: index (7,)
import tinyad as ti

x = ti.field(ti.f32, shape=4)

x[7] = 1.0  # <- error
