"""The compile cache under the conditions a real machine meets (compile/cache.py).

A truncated or corrupt entry is rebuilt (tests/test_fast_backend.py covers it across processes);
here: two processes compiling the same kernel into an empty cache at once, a changed tinyad or
numba version, an entry edited by hand, and a cache directory that cannot be written. None may
crash, and none may serve code that is not what the kernel's IR generates now.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tinyad as ti
from tinyad.compile import cache

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PROGRAM = textwrap.dedent('''
    import json, sys
    import numpy as np
    import tinyad as ti
    ti.init(mode="fast", default_fp=ti.f64)
    n = 16
    x = ti.field(ti.f64, shape=n, needs_grad=True)
    loss = ti.field(ti.f64, shape=(), needs_grad=True)

    @ti.kernel
    def compute():
        for i in x:
            loss[None] += ti.exp(0.5 * x[i]) * x[i]

    x.from_numpy(np.linspace(-1, 1, n))
    with ti.ad.Tape(loss=loss):
        compute()
    print(json.dumps({"loss": float(loss[None]), "grad": x.grad.to_numpy().tolist()}))
''')


def expected():
    """The loss and gradient of PROGRAM, by hand: d/dx (x e^{x/2}) = e^{x/2} (1 + x/2)."""
    x = np.linspace(-1, 1, 16)
    return float(np.sum(np.exp(0.5 * x) * x)), np.exp(0.5 * x) * (1 + 0.5 * x)


def start(directory, cache_dir):
    script = directory / "program.py"
    if not script.exists():
        script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=ROOT, TINYAD_CACHE_DIR=str(cache_dir),
               TINYAD_COMPILE_AHEAD="0")
    return subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]), err


def assert_right(result):
    loss, grad = expected()
    assert result["loss"] == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(result["grad"], grad, rtol=1e-12)


def test_two_processes_compile_the_same_kernel_at_once(tmp_path):
    """Both write the same entries into an empty cache at the same moment: each gets whole
    files (write-to-temp, then rename) and the right answer, and a third process reuses them."""
    cache_dir = tmp_path / "cache"
    first, second = start(tmp_path, cache_dir), start(tmp_path, cache_dir)
    for proc in (first, second):
        assert_right(finish(proc)[0])
    assert not list(cache_dir.glob("*.tmp")), "a temporary file was left behind"
    assert_right(finish(start(tmp_path, cache_dir))[0])


def test_an_entry_edited_by_hand_is_not_served(tmp_path, monkeypatch):
    """The cache compares an entry's text with what it would generate: an edited entry (here:
    the kernel's arithmetic changed) is rewritten, never imported as it is."""
    monkeypatch.setenv("TINYAD_CACHE_DIR", str(tmp_path))

    def run():
        ti.init(mode="fast", default_fp=ti.f64)
        x = ti.field(ti.f64, shape=4)

        @ti.kernel
        def triple():
            for i in x:
                x[i] = 3.0 * x[i] + 1.0

        x.from_numpy(np.arange(4.0))
        triple()
        return x.to_numpy().tolist()

    assert run() == [1.0, 4.0, 7.0, 10.0]
    entries = list(tmp_path.glob("*.py"))
    assert len(entries) == 1
    entries[0].write_text(entries[0].read_text().replace("3.0 *", "5.0 *"))
    monkeypatch.setattr(cache, "_modules", {})   # as a fresh process: import from the file
    assert run() == [1.0, 4.0, 7.0, 10.0]
    assert list(tmp_path.glob("*.py")) == entries
    assert "5.0 *" not in entries[0].read_text()


@pytest.mark.parametrize("package", ["tinyad", "numba"])
def test_a_new_version_gets_new_entries(monkeypatch, package):
    """Machine code compiled by another tinyad or numba must not be loaded: the versions are
    part of every entry's name."""
    before = cache.key("kernel source")
    monkeypatch.setattr(cache, "_VERSIONS", None)
    if package == "tinyad":
        monkeypatch.setattr(cache, "_tinyad_version", lambda: "99.0")
    else:
        import numba
        monkeypatch.setattr(numba, "__version__", "0.99.0")
    after = cache.key("kernel source")
    assert after != before
    monkeypatch.undo()
    monkeypatch.setattr(cache, "_VERSIONS", None)
    assert cache.key("kernel source") == before


def test_a_cache_directory_that_cannot_be_made(tmp_path):
    """TINYAD_CACHE_DIR under a plain file (as a read-only or mistyped path behaves): the
    program runs right, from a temporary cache, after one warning that says so."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    result, err = finish(start(tmp_path, blocker / "cache"))
    assert_right(result)
    assert "is not writable" in err and err.count("is not writable") == 1


def test_a_cache_directory_without_write_permission(tmp_path, monkeypatch):
    """A directory that exists but cannot be written (root ignores the mode bits, so the
    permission check is what is simulated): compiled code goes to a temporary directory."""
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    monkeypatch.setenv("TINYAD_CACHE_DIR", str(read_only))
    monkeypatch.setattr(cache, "_fallback_dir", None)
    real_access = os.access
    monkeypatch.setattr(cache.os, "access", lambda path, how: (
        False if os.path.realpath(path) == str(read_only) else real_access(path, how)))
    with pytest.warns(RuntimeWarning, match="is not writable"):
        directory = cache.cache_dir()
    assert directory != str(read_only)
    ti.init(mode="fast", default_fp=ti.f64)
    x = ti.field(ti.f64, shape=3)

    @ti.kernel
    def fill():
        for i in x:
            x[i] = i * 2.0

    fill()
    assert x.to_numpy().tolist() == [0.0, 2.0, 4.0]
    assert not list(read_only.iterdir())
    assert list(Path(directory).glob("*.py"))
