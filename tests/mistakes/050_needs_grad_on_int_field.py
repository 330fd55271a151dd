# expect: TinyadTypeError: only float fields
import tinyad as ti

n = ti.field(ti.i32, shape=4, needs_grad=True)  # <- error
