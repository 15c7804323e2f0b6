"""benchmarks.gpu (``python -m benchmarks.gpu``): its pairing of runs, its refusal without a GPU,
and (where one exists) a quick run end to end. No speed is asserted."""

from __future__ import annotations

import json

import pytest

from benchmarks import gpu as bench_gpu
from benchmarks.gpu import OURS, PRELOAD, STEP_ONLY, TORCH, Run


def _run(label: str, rep: int, rate: float) -> Run:
    return Run("images", label, 2, 4.0, rep, rate, 0.05 + rep / 100)


def test_ratios_are_paired_within_a_repetition():
    # rep 0: ours 2x torch, at half the ceiling; rep 1: 4x torch, at the ceiling.
    runs = [
        _run(STEP_ONLY, 0, 100.0), _run(TORCH, 0, 25.0), _run(OURS, 0, 50.0),
        _run(STEP_ONLY, 1, 10.0), _run(TORCH, 1, 2.5), _run(OURS, 1, 10.0),
        _run(PRELOAD, 1, 5.0),
    ]
    rows = {row["loader"]: row for row in bench_gpu.summarize(runs)}
    assert rows[OURS]["vs_torch"] == pytest.approx(3.0)  # median of 2 and 4
    assert rows[OURS]["of_ceiling"] == pytest.approx(0.75)  # median of 0.5 and 1.0
    assert rows[OURS]["samples_per_s"] == pytest.approx(30.0)
    assert rows[PRELOAD]["vs_torch"] == pytest.approx(2.0)  # its only repetition
    assert rows[STEP_ONLY]["of_ceiling"] == pytest.approx(1.0)
    table = bench_gpu.format_table(list(rows.values()))
    assert "ours+preload" in table and "3.00" in table and "0.75" in table


def test_arguments_are_checked():
    with pytest.raises(SystemExit):
        bench_gpu.parse_args(["--workloads", "images,tiny"])
    args = bench_gpu.parse_args(["--quick", "--workers", "1,3", "--step-ms", "0,2.5"])
    assert (args.reps, args.seconds, args.workers, args.step_ms) == (1, 0.3, [1, 3], [0.0, 2.5])


@pytest.mark.skipif(bench_gpu.cuda_missing() is None, reason="a GPU is present: the refusal cannot be reached")
def test_without_a_gpu_it_says_why_and_exits_2():
    lines = []
    assert bench_gpu.main(["--quick"], log=lines.append) == 2
    assert "cannot run" in lines[0] and ("CUDA" in lines[0] or "PyTorch" in lines[0])


@pytest.mark.skipif(bench_gpu.cuda_missing() is not None, reason="no CUDA device (or no PyTorch) on this machine")
def test_quick_run_on_a_gpu(tmp_path):
    out = tmp_path / "gpu.json"
    lines = []
    argv = ["--quick", "--workloads", "images", "--workers", "2", "--step-ms", "0,1", "--json", str(out)]
    assert bench_gpu.main(argv, log=lines.append) == 0
    saved = json.loads(out.read_text())
    assert {(r["loader"], r["step_ms"]) for r in saved["rows"]} == {
        (label, step) for label in bench_gpu.RUNS for step in (0.0, 1.0)
    }
    assert all(r["samples_per_s"] > 0 for r in saved["rows"])

