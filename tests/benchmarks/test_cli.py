"""Smoke test of the main bench (benchmarks.compare): tiny quick runs, in a subprocess, through
its command line ``python -m benchmarks.compare``.

No speed is asserted: the numbers depend on the machine. What is checked is that the tool
runs end to end, prints a row per (workload, loader, num_workers), writes JSON whose numbers
are sane, that our loader's batches matched the plain loop's, that the workloads comparing
our loader's settings (preload, threads vs processes, monitoring) give their derived numbers,
and that --plot writes a PNG. The quick runs take about 25 s together.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import compare as cli

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = [sys.executable, "-m", "benchmarks.compare"]
SMALL = ("scalars", "record", "vector")
WORKLOADS = ("tiny", *SMALL, "images", "decode")
SETTINGS = ("preload", "cv2", "pyloop", "monitor")
POOLS = ("matmul",)  # torchconv needs torch; both run with the settings, --no-torch
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
HAS_CV2 = importlib.util.find_spec("cv2") is not None


def _torch_importable() -> bool:
    done = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, timeout=120)
    return done.returncode == 0


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    command = [
        *LAUNCHER, "--quick", "--reps", "1", "--seconds", "0.05",
        "--workloads", ",".join(WORKLOADS), "--workers", "0,2", "--json", str(out),
    ]
    return _bench(command, out)


def _bench(command: list[str], out: Path, cwd: Path = ROOT) -> tuple[str, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=cwd, env=env)
    assert done.returncode == 0, f"bench failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout, json.loads(out.read_text())


@pytest.fixture(scope="module")
def settings_run(tmp_path_factory):
    """The settings workloads (and the cheapest comparison) with --plot where possible."""
    if not HAS_CV2:
        pytest.skip("the cv2 workload needs OpenCV (cv2), which is not importable")
    folder = tmp_path_factory.mktemp("bench-settings")
    out, png = folder / "bench.json", folder / "bench.png"
    command = [
        *LAUNCHER, "--quick", "--reps", "1", "--seconds", "0.05",
        "--workloads", ",".join(("tiny", *SETTINGS, *POOLS)), "--no-torch", "--json", str(out),
    ] + (["--plot", str(png)] if HAS_MATPLOTLIB else [])
    stdout, result = _bench(command, out)
    return stdout, result, png


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
    floors = {key for key in keys if key[1] == "no-loader+collator"}
    assert floors == {(workload, "no-loader+collator", 0) for workload in SMALL}  # serial, small only
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
    for name in SMALL:
        assert {f"{name}: serial >= 0.9x the no-loader rate", f"{name}: 2 workers >= 1.0x our "
                "serial rate", f"{name}: 2 workers >= 0.5x the no-loader rate"} <= judged
        serial = next(t for t in result["targets"] if t["target"] == f"{name}: serial >= 0.9x the no-loader rate")
        assert serial["ceiling_note"].endswith("for the plain loop with our collator here")
        assert 0 < serial["ideal"] < 10  # that loop's rate over the plain loop's
    assert all(isinstance(t["met"], bool) for t in result["targets"])


@pytest.mark.timeout(300)
def test_workers_are_compared_with_our_serial_loader_and_cpu_is_counted_over_the_tree(quick_run):
    _, result = quick_run
    rows = _rows(result)
    for name in WORKLOADS:
        assert rows[(name, "ours", 2)]["vs_serial"] > 0
        assert "vs_serial" not in rows[(name, "ours", 0)]
        for loader in ("ours", "no-loader"):
            workers = 2 if loader == "ours" else None
            assert rows[(name, loader, workers)]["timed_cpu_us_per_sample"] > 0


def test_bad_arguments_are_refused():
    done = subprocess.run(
        [*LAUNCHER, "--workloads", "nope"], capture_output=True, text=True,
        timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    assert "workloads must be among" in done.stderr


def _rows(result: dict) -> dict:
    return {(r["workload"], r["loader"], r["num_workers"]): r for r in result["rows"]}


@pytest.mark.timeout(300)
def test_settings_workloads_have_their_runs(settings_run):
    stdout, result, _ = settings_run
    rows = _rows(result)
    assert result["config"]["workloads"] == ["tiny", *SETTINGS, *POOLS]
    assert result["checks"] == {name: "ok" for name in ("tiny", *SETTINGS, *POOLS)}
    for workers in (0, 2):
        for loader in ("load-only", "step-only", "ours", "ours+preload"):
            assert ("preload", loader, workers) in rows
        assert ("monitor", "ours", workers) in rows and ("monitor", "ours+monitor", workers) in rows
    for name in ("cv2", "pyloop"):
        assert {(name, "ours", 2), (name, "ours-thread", 2), (name, "no-loader", None)} <= set(rows)
    # Loader comparisons with a fixed worker count: PyTorch's run is left out under --no-torch.
    matmul = {key for key in rows if key[0] == "matmul"}
    assert matmul == {("matmul", "ours", 2), ("matmul", "no-loader", None)}
    for title in ("preload (", "thread vs process workers", "monitoring ("):
        assert title in stdout


@pytest.mark.timeout(300)
def test_settings_numbers_are_sane(settings_run):
    _, result, _ = settings_run
    rows = _rows(result)
    for workers in (0, 2):
        calibration = result["calibration"][str(workers)]
        assert calibration["matmuls"] >= 1 and calibration["load_ms"] > 0
        for loader in ("ours", "ours+preload"):
            row = rows[("preload", loader, workers)]
            assert 0 < row["overlap"] < 4 and 0 < row["overlap_ceiling"] <= 2.5, row
        overhead = rows[("monitor", "ours+monitor", workers)]["monitor_overhead_pct"]
        assert math.isfinite(overhead) and overhead > -100
    for name in ("cv2", "pyloop"):
        assert rows[(name, "ours-thread", 2)]["vs_process"] > 0
        assert rows[(name, "ours", 2)]["stages_ms"]["fetch"] > 0
    judged = {t["target"] for t in result["targets"]}
    assert any("preload overlap" in t for t in judged) and any("monitoring" in t for t in judged)
    assert all(r["leftover_processes"] == 0 for r in result["rows"])


@pytest.mark.timeout(300)
def test_plot_writes_a_png(settings_run):
    if not HAS_MATPLOTLIB:
        pytest.skip("--plot needs matplotlib, which is not importable")
    stdout, _, png = settings_run
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert f"plot written to {png}" in stdout


@pytest.mark.timeout(300)
def test_an_earlier_json_is_reprinted(settings_run, tmp_path):
    first, result, _ = settings_run
    path = tmp_path / "earlier.json"
    path.write_text(json.dumps(result))
    done = subprocess.run(
        [*LAUNCHER, "--from-json", str(path)], capture_output=True, text=True,
        timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    table = lambda text: [line for line in text.splitlines() if line.startswith(("tiny", "preload"))]
    assert table(done.stdout) == table(first)


def test_the_default_run_has_every_workload_and_their_own_worker_counts():
    config, _ = cli.parse_args([])
    expected = list(WORKLOADS) + [w for w in SETTINGS if w != "cv2" or HAS_CV2] + list(POOLS)
    expected += ["torchconv"] if importlib.util.find_spec("torch") is not None else []
    assert sorted(config.workloads) == sorted(expected)
    assert config.workers_for("preload") == (0, 2) and config.workers_for("pyloop") == (2,)
    assert config.workers_for("matmul") == (2,)
    assert config.workers_for("tiny") == config.workers_for("monitor") == (0, 2)
    config, _ = cli.parse_args(["--workers", "1"])
    assert config.workers_for("preload") == config.workers_for("tiny") == (1,)


def test_plot_without_matplotlib_says_so_before_measuring():
    code = (
        "import sys; sys.modules['matplotlib'] = None; from benchmarks.compare import main; "
        "sys.exit(main(['--quick', '--plot', 'never.png']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    assert "--plot needs matplotlib" in done.stderr and "checks" not in done.stdout


@pytest.mark.parametrize("field,value", [("seconds", math.nan), ("seconds", math.inf), ("patience", math.nan)])
def test_a_config_built_in_python_refuses_non_finite_times(field, value):
    from benchmarks.config import BenchConfig

    with pytest.raises(ValueError, match=field):
        BenchConfig(**{field: value})
