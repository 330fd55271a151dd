# expect: TinyadRuntimeError: needs_grad=True
import tinyad as ti

loss = ti.field(ti.f32, shape=())
with ti.ad.Tape(loss=loss):  # <- error
    pass
