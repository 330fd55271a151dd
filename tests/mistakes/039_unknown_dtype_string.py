# expect: TinyadTypeError: float33
import tinyad as ti

y = ti.field("float33", shape=4)  # <- error
