"""`python -m benchmarks --interp-vs REV` (benchmarks/interp_vs.py): an earlier commit's tinyad
runs from its own unpacked tree, and the tables divide the right numbers."""
import os
import shutil
import subprocess

import pytest

from benchmarks import interp_vs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _result(fwd, fb, rss=40.0):
    return {"forward_s": fwd, "fwd_bwd_s": fb, "forward_cpu_s": fwd, "fwd_bwd_cpu_s": fb,
            "peak_rss_mb": rss}


def test_the_tables_divide_then_by_now_and_checked_by_unchecked():
    rows = [("wave", "n=32", "off", _result(2.0, 8.0), _result(0.1, 0.2, 40),
             {"traced_peak_mb": 1.0}),
            ("wave", "n=32", "error", _result(3.0, 9.0), _result(0.15, 0.3, 60),
             {"traced_peak_mb": 1.5})]
    speed = interp_vs.speedup_table("abc123", rows).splitlines()
    assert speed[3].split()[-6:] == ["2.0000", "0.1000", "20.0x", "8.0000", "0.2000", "40.0x"]
    assert speed[4].split()[-1] == "30.0x"
    cost = interp_vs.cost_table(rows).splitlines()[-1].split()
    assert cost[2:5] == ["1.50", "1.50", "1.00/1.50"] and cost[5] == "1.50"
    assert cost[6:] == ["40/60", "1.50"]


def test_an_error_is_shown_in_its_row():
    rows = [("mpm", "n=4", "off", {"error": "boom"}, _result(1, 1), {"traced_peak_mb": 1.0}),
            ("mpm", "n=4", "error", _result(1, 1), {"error": "bang"}, {"traced_peak_mb": 1.0})]
    speed = interp_vs.speedup_table("abc", rows)
    assert "error: boom" in speed and "error: bang" in speed
    assert "error: bang" in interp_vs.cost_table(rows)     # (only today's runs there)


@pytest.mark.skipif(shutil.which("git") is None or
                    not os.path.isdir(os.path.join(ROOT, ".git")) and
                    not os.path.isfile(os.path.join(ROOT, ".git")),
                    reason="needs the git repository")
def test_an_unpacked_commit_imports_its_own_tinyad(tmp_path):
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    run_dir = interp_vs.unpack(head, str(tmp_path / "old"))
    assert interp_vs.tinyad_location(run_dir).startswith(run_dir)
    assert os.path.samefile(os.path.join(run_dir, "benchmarks"),
                            os.path.join(ROOT, "benchmarks"))
