# expect: TinyadTypeError: zero extent
import tinyad as ti

y = ti.field(ti.f32, shape=0)  # <- error
