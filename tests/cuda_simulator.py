"""Programs for numba's CUDA simulator, run in a fresh process (NUMBA_ENABLE_CUDASIM=1 must be
set before numba is imported, so each runs as its own program).

`simulator_program(body)` puts the preamble before `body` (written at any indentation): where the
simulator cannot run, the program prints `{"skip": why}` as its JSON line and exits 0.
"""
import textwrap

PREAMBLE = '''\
import json, os, sys, warnings
warnings.simplefilter("ignore")
try:
    from numba import cuda
    assert cuda.is_available()
except Exception as exc:
    print(json.dumps({"skip": f"the numba CUDA simulator is not usable: {exc!r}"}))
    sys.exit(0)
'''


def simulator_program(body: str) -> str:
    return PREAMBLE + textwrap.dedent(body)
