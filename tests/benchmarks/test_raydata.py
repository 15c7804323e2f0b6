"""The Ray bench: a tiny run end to end (where Ray is installed), and its summary on made-up runs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import raydata as r

ROOT = Path(__file__).resolve().parents[2]


def test_a_quick_run_prints_every_contender_the_overhead_and_rays_start_up(tmp_path):
    pytest.importorskip("ray", reason="Ray Data is not installed: pip install 'dataloader[ray]'")
    pytest.importorskip("cv2", reason="the decode workload needs OpenCV: pip install '.[vision]'")
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.raydata", "--quick", "--seconds", "0.2",
         "--images", "192", "--json", str(out)],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    for name in (r.ALONE, r.RAY, r.STREAM):
        assert name in done.stdout
    assert "RayStream overhead on decode" in done.stdout and "ray.init:" in done.stdout
    assert out.exists()


def _runs(rates):
    return [r.Run(workload, name, rep, rate, 1000, 1.0)
            for (workload, name), per_rep in rates.items() for rep, rate in enumerate(per_rep)]


def test_the_overhead_is_paired_within_a_repetition():
    rows = r.summarize(_runs({(r.DECODE, r.RAY): [100, 200, 400], (r.DECODE, r.STREAM): [90, 200, 400]}))
    stream = next(row for row in rows if row["contender"] == r.STREAM)
    assert stream["overhead"] == pytest.approx(0.0)  # the median of 11%, 0 and 0
    assert "met" in r.verdict(rows) and "not met" not in r.verdict(rows)
    assert "not measured" in r.verdict(r.summarize(_runs({(r.DECODE, r.RAY): [100]})))
