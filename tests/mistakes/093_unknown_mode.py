# expect: TinyadValueError: mode must be one of
import tinyad as ti

ti.init(mode="gpu")  # <- error
