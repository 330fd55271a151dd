# expect: TinyadSyntaxError: with
import tinyad as ti

x = ti.field(ti.f32, shape=4)

import contextlib


@ti.kernel
def k():
    with contextlib.suppress(Exception):  # <- error
        x[0] = 1.0

k()
