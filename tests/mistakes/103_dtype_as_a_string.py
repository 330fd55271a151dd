# expect: TinyadTypeError: not the string 'double'
import tinyad as ti

x = ti.field(dtype="double", shape=4)  # <- error
