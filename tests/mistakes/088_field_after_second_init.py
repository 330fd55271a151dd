# expect: TinyadRuntimeError: before the last ti.init()
import tinyad as ti

x = ti.field(ti.f32, shape=4)

ti.init()
x[0] = 1.0  # <- error
