# expect: TinyadRuntimeError: entered only once
import tinyad as ti

loss = ti.field(ti.f32, shape=(), needs_grad=True)
tape = ti.ad.Tape(loss=loss)
with tape:
    pass
with tape:  # <- error
    pass
