# expect: TinyadRuntimeError: do not nest
import tinyad as ti

loss = ti.field(ti.f32, shape=(), needs_grad=True)
with ti.ad.Tape(loss=loss):
    with ti.ad.Tape(loss=loss):  # <- error
        pass
