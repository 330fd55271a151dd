# expect: TinyadAttributeError: ti.GUI
import tinyad as ti

gui = ti.GUI("window", (64, 64))  # <- error
