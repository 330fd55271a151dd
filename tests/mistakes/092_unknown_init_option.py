# expect: TinyadTypeError: unknown option
import tinyad as ti

ti.init(arch=ti.cpu, fast=True)  # <- error
