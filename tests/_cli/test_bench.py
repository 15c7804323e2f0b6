"""`python -m dataloader bench` hands its options to the installed dataloader.bench."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_help_is_the_benchs_own(capsys):
    from dataloader.__main__ import main

    try:
        main(["bench", "--help"])
    except SystemExit as stop:
        assert stop.code == 0
    assert "--workloads" in capsys.readouterr().out


def test_bench_help_works_outside_the_repository(tmp_path):
    """No tools/ folder is needed: the bench is part of the package."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "dataloader", "bench", "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "--workloads" in done.stdout and "--from-json" in done.stdout


def test_importing_dataloader_leaves_the_bench_alone():
    code = "import sys, dataloader, dataloader.__main__; print('dataloader.bench' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "False", done.stderr
