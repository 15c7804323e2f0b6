"""Smoke test of tools/bench.py: a tiny quick run, in a subprocess, through the command line.

No speed is asserted: the numbers depend on the machine. What is checked is that the tool
runs end to end, prints a row per (workload, loader, num_workers), writes JSON whose numbers
are sane, and that our loader's batches matched the plain loop's.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tools" / "bench.py"
WORKLOADS = ("tiny", "images", "decode")


def _torch_importable() -> bool:
    done = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, timeout=120)
    return done.returncode == 0


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    command = [
        sys.executable, str(BENCH), "--quick", "--reps", "1", "--seconds", "0.05",
        "--workloads", ",".join(WORKLOADS), "--workers", "0,2", "--json", str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
    assert done.returncode == 0, f"bench failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout, json.loads(out.read_text())


@pytest.mark.timeout(300)
def test_a_row_per_workload_loader_and_worker_count(quick_run):
    stdout, result = quick_run
    loaders = ["ours", "no-loader"] + (["torch"] if _torch_importable() else [])
    assert result["torch"] == ("torch" in loaders)
    keys = [(r["workload"], r["loader"], r["num_workers"]) for r in result["rows"]]
    assert len(keys) == len(set(keys)), f"duplicate rows: {keys}"
    for workload in WORKLOADS:
        assert (workload, "no-loader", None) in keys
        assert (workload, "ideal", 2) in keys
        for loader in set(loaders) - {"no-loader"}:
            for workers in (0, 2):
                assert (workload, loader, workers) in keys
    table_rows = [line for line in stdout.splitlines() if line.split(" ", 1)[0] in WORKLOADS]
    assert len(table_rows) == len(result["rows"]), stdout


@pytest.mark.timeout(300)
def test_numbers_are_sane(quick_run):
    _, result = quick_run
    for row in result["rows"]:
        where = f"{row['workload']}/{row['loader']}/{row['num_workers']}"
        for column in ("samples_per_s", "vs_no_loader", "peak_pss_mib", "cpu_us_per_sample"):
            value = row[column]
            sane = value is not None and math.isfinite(value) and value > 0
            assert sane, f"{where}: {column}={value}"
        if row["loader"] in ("ours", "torch", "no-loader"):
            assert 0 < row["first_batch_ms"] < 60_000, where
        if row["loader"] == "ours" and result["torch"]:
            assert row["vs_torch"] > 0 and row["first_batch_vs_torch"] > 0, where
        if row["workload"] == "images":
            assert row["bytes_per_s"] > 0 and row["vs_memcpy"] > 0, where
        assert row["leftover_processes"] == 0, f"{where}: processes outlived their loader"
    baselines = [r for r in result["rows"] if r["loader"] == "no-loader"]
    assert all(r["vs_no_loader"] == pytest.approx(1.0) for r in baselines)
    assert result["memcpy_bytes_per_s"] > 0


@pytest.mark.timeout(300)
def test_our_batches_matched_the_plain_loop(quick_run):
    _, result = quick_run
    assert result["checks"] == {workload: "ok" for workload in WORKLOADS}


@pytest.mark.timeout(300)
def test_targets_are_judged(quick_run):
    _, result = quick_run
    judged = {t["target"] for t in result["targets"]}
    assert any("decode" in t for t in judged)
    assert all(isinstance(t["met"], bool) for t in result["targets"])


def test_bad_arguments_are_refused():
    done = subprocess.run(
        [sys.executable, str(BENCH), "--workloads", "nope"], capture_output=True, text=True,
        timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    assert "workloads must be among" in done.stderr
