"""The launchers in tools/ run their tool from the package, options and all (``--help`` here;
tests/bench/test_cli.py runs ``tools/bench.py --quick`` end to end)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("tool,option", [
    ("bench.py", "--from-json"), ("bench_floor.py", "--main-us"), ("bench_gpu.py", "--step-ms"),
    ("bench_vision.py", "--tune-malloc"), ("bench_columnar.py", "--rows"), ("bench_ray.py", "--cpus"),
    ("bench_autotune.py", "--warmup"),
])
def test_each_launcher_shows_its_tools_options(tool, option, tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / tool), "--help"], capture_output=True, text=True,
        timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert option in done.stdout and "--reps" in done.stdout


@pytest.mark.parametrize("name,option", [("columnar", "--rows"), ("ray", "--cpus"), ("autotune", "--warmup")])
def test_the_main_bench_runs_a_companion_named_first(name, option, capsys):
    from dataloader.bench.cli import main

    with pytest.raises(SystemExit) as exited:  # --help exits 0 after printing the companion's options
        main([name, "--help"])
    assert exited.value.code == 0
    assert option in capsys.readouterr().out


def test_companion_workloads_in_the_list_are_refused_with_the_way_to_run_them(capsys):
    from dataloader.bench.cli import main

    assert main(["--workloads", "tiny,columnar"]) == 2
    assert "python -m dataloader bench columnar" in capsys.readouterr().err


def test_the_resume_bench_measures_state_dict_cost_end_to_end(tmp_path):
    """tools/bench_resume.py is a script of its own (its baseline is a git worktree); its
    state_dict() part runs here for real, on 8 process workers, and writes its rows."""
    out = tmp_path / "resume.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_resume.py"), "--quick", "--parts", "cost", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert "full reorder buffer" in done.stdout
    rows = json.loads(out.read_text())["cost"]
    assert [row["case"].split(",")[0] for row in rows] == ["in_order=True", "in_order=True", "in_order=False"]
    full = rows[0]
    assert full["held"] > 16 and full["calls"] > 0 and full["state_bytes"] < 4096  # a full buffer, a small state
