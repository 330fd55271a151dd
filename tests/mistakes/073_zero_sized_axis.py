# expect: TinyadTypeError: zero extent
import tinyad as ti

y = ti.Vector.field(3, ti.f32, shape=(16, 0))  # <- error
