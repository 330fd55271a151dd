"""The lessons (`tinyad lesson N`), installed as tinyad.lesson_files.

Every section of the seed documents (/work/shared/seeds/) is taught by some lesson:

seed 000 (Taichi's old differentiable-programming page) and 001 (Taichi 1.7's):
  Introduction: the derivative by hand, then by autodiff ............ 1
  Using ti.Tape() (needs_grad, the 0-D loss, the loss set to 0) ..... 1, 2, 3
  Usage example / case study: gravity, F = -dU/dx ................... 3
  Using kernel.grad(), several outputs, forward before backward ..... 4
  ti.root.lazy_grad() (and place(), seed 003's combinations) ........ 5
  Global Data Access Rule 1 (the docs' func_broke_rule_1) ........... 6
  Global Data Access Rule 2 (the docs' func_break_rule_2) ........... 7
  Kernel Simplicity Rule, and the ti.static workaround .............. 8
  Extending the autodiff system: grad_replaced / grad_for ........... 9
  Checkpointing by recomputation in a custom gradient ............... 11
  Forward mode (ti.ad.FwdMode, needs_dual, .dual) ................... 12
  DiffTaichi's simulators ...... examples/ (mass_spring, wave, mpm) and 3, 11, 14
seed 002 (Taichi issue #5055, forward mode and function derivatives):
  forward vs reverse: when each pays, a Jacobian column vs a row .... 12
  the derivative of a function in a kernel (grad, jvp, vjp) ......... 13
  second order, forward over reverse (hvp) .......................... 13
seed 003 (Taichi issue #2485, what the docs fail to teach):
  guidelines: building a differentiable program forward-first ....... 14
  place() and needs_grad / lazy_grad combinations ................... 5
  recursive formulas and explicit taping (the EWMA) ................. 10
  control flow that reads a mutated integer field (sample += 1) ..... 15 (and 10)

Lessons 11 to 15 are tested in tests/test_lessons_seeds.py, 1 to 10 in tests/test_lessons.py.
"""
