# expect: TinyadTypeError: negative extent
import tinyad as ti

y = ti.field(ti.f32, shape=-4)  # <- error
