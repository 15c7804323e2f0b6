import subprocess
import sys


def test_demo_runs_end_to_end_and_prints_the_stage_table():
    result = subprocess.run(
        [sys.executable, "-m", "dataloader", "demo", "--epochs", "1", "--samples", "256", "--size", "32",
         "--batch-size", "32"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "samples/s with 2 workers" in result.stdout
    for stage in ("fetch", "transform", "collate", "transport", "wait", "preload", "verdict:"):
        assert stage in result.stdout
