"""One measurement in a fresh process: a workload module's JSON line (benchmarks/harness.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys


def run_module(module: str, args: list, root: str, env: dict | None = None,
               timeout: float = 1800) -> dict:
    """`python -m module args` from `root` (first on its path): the last line it prints, as
    JSON, or {"error": the last stderr line}."""
    full_env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    full_env.update(env or {})
    try:
        proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                              text=True, env=full_env, cwd=root, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit code {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])
