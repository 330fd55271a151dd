# expect: TinyadRuntimeError: more than this machine's memory
import tinyad as ti

grid = ti.field(ti.f32, shape=(100000, 100000, 100))  # <- error
