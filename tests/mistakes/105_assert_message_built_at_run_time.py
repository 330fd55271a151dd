# expect: TinyadTypeError: cannot build strings or messages at run time
import tinyad as ti

x = ti.field(ti.f32, shape=4)


@ti.kernel
def check():
    for i in x:
        assert x[i] >= 0, "negative: " + str(x[i])  # <- error


check()
