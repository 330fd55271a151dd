# expect: TinyadRuntimeError: 0-D field
import tinyad as ti

loss = ti.field(ti.f32, shape=4, needs_grad=True)
with ti.ad.Tape(loss=loss):  # <- error
    pass
