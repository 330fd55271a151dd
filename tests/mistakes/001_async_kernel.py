# expect: TinyadSyntaxError: async def
import tinyad as ti

x = ti.field(ti.f32, shape=4)

@ti.kernel
async def k():  # <- error
    x[0] = 1.0

k()
