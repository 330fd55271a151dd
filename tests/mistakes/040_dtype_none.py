# expect: TinyadTypeError: dtype
import tinyad as ti

y = ti.field(None, shape=4)  # <- error
