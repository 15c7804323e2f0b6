"""Smoke test of tools/bench_vision.py: it runs, and prints one table row per transform."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "tools" / "bench_vision.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_vision", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_transform_has_a_row_and_resize_has_a_peer(bench, capsys):
    assert bench.main(["--seconds", "0.01", "--reps", "1", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    assert len(rows) == len(bench.ours())
    resize = next(row for row in rows if row.startswith("| `Resize("))
    assert resize.count("x |") == 1  # a ratio against the peer
    assert ("torchvision" in out) and ("Pillow" in out or "importable:" in out)


def test_peers_cover_the_same_operations(bench):
    import numpy as np

    assert set(bench.pillow_ops(np.random.default_rng(0))) <= set(bench.ours())
