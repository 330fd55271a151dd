"""The tree-walking interpreter: tinyad's executable specification of the IR."""
from tinyad.interp.evaluator import Program
from tinyad.interp.memory import Memory

__all__ = ["Program", "Memory"]
