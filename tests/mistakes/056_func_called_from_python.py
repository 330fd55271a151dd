# expect: TinyadTypeError: can only be called from a kernel
import tinyad as ti


@ti.func
def double(v):
    return v * 2


double(1.0)  # <- error
