"""The tree-walking interpreter: tinyad's executable specification of the IR."""
from interp.evaluator import Program
from interp.memory import Memory

__all__ = ["Program", "Memory"]
