"""The launchers in tools/ run their tool from the package, options and all (``--help`` here;
tests/bench/test_cli.py runs ``tools/bench.py --quick`` end to end)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("tool,option", [
    ("bench.py", "--from-json"), ("bench_floor.py", "--main-us"), ("bench_gpu.py", "--step-ms"),
    ("bench_vision.py", "--tune-malloc"), ("bench_columnar.py", "--rows"), ("bench_ray.py", "--cpus"),
])
def test_each_launcher_shows_its_tools_options(tool, option, tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / tool), "--help"], capture_output=True, text=True,
        timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert option in done.stdout and "--reps" in done.stdout
