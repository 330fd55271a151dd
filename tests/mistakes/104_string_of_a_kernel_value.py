# expect: TinyadTypeError: cannot build strings or messages at run time
import tinyad as ti

x = ti.field(ti.f32, shape=4)


@ti.kernel
def show():
    for i in x:
        print("x = " + str(x[i]))  # <- error


show()
