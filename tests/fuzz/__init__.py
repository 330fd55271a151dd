"""Differential fuzzing: random well-formed tinyad programs, run in interp and fast mode and
differentiated; values and gradients must agree between the modes and with central finite
differences in f64, and the rule checker must report nothing (the programs obey the Global Data
Access Rules by construction).

  gen.py      the program generator (a hypothesis strategy, and a seeded one for long runs)
  harness.py  runs one program in one mode and compares the results
  __main__.py the long profile: `python -m tests.fuzz --n 10000`

tests/test_fuzz.py runs the short profile in the test suite and the regression tests for what
the fuzzer found.
"""
