# expect: TinyadRuntimeError: already placed
import tinyad as ti

y = ti.field(ti.f32)
ti.root.dense(ti.i, 4).place(y)
ti.root.dense(ti.i, 8).place(y)  # <- error
