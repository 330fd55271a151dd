"""Taichi's GUI colour helpers, for programs that compute colours for a window tinyad does not
draw: 0xRRGGBB integers from (r, g, b) in [0, 1], element-wise over arrays, and back."""
import numpy as np


def rgb_to_hex(c):
    """(r, g, b), each a number or an array in [0, 1] -> 0xRRGGBB (clipped), as Taichi's."""
    def to255(x):
        return np.clip(np.int32(np.asarray(x) * 255), 0, 255)
    return (to255(c[0]) << 16) + (to255(c[1]) << 8) + to255(c[2])


def hex_to_rgb(color):
    """0xRRGGBB -> (r, g, b) in [0, 1]."""
    return ((color >> 16) & 0xFF) / 255, ((color >> 8) & 0xFF) / 255, (color & 0xFF) / 255
