# expect: TinyadAttributeError: ti.field
import tinyad as ti

y = ti.feild(ti.f32, shape=4)  # <- error
