"""The columnar bench: a short run end to end, and its pure helpers on made-up runs."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import columnar as c
from benchmarks.columnar_data import CROP_SIDE, Crop, DecodeCrop, TakeRows, jpegs, tabular

ROOT = Path(__file__).resolve().parents[2]

# The bench's images are written and decoded with OpenCV, which the test extra installs below
# Python 3.14 only (no wheel for free-threaded 3.14t).
needs_cv2 = pytest.mark.skipif(importlib.util.find_spec("cv2") is None,
                               reason="the bench uses OpenCV (opencv-python-headless), not installed here")


@needs_cv2
def test_a_short_run_prints_every_contender_and_target(tmp_path):
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.columnar", "--quick", "--reps", "1",
         "--seconds", "0.2", "--rows", "20000", "--images", "192", "--json", str(out)],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    for contender in c.contenders(2):
        assert contender.name in done.stdout or f"skipped {contender.name}" in done.stdout
    assert done.stdout.count(">= ") == len(c.TARGETS)
    assert out.exists()


def test_evaluate_says_met_not_met_or_unmeasured():
    assert c.evaluate(0.8, 0.8) == "met"
    assert c.evaluate(0.79, 0.8) == "not met"
    assert c.evaluate(None, 0.8) == "-"


def _runs(rates):
    return [c.Run(workload, name, rep, rate, 1000, 1.0)
            for (workload, name), per_rep in rates.items() for rep, rate in enumerate(per_rep)]


def test_summarize_pairs_ratios_within_a_repetition():
    runs = _runs({(c.TABULAR, c.PLAIN): [100, 200, 300], (c.TABULAR, c.OURS): [90, 100, 330],
                  (c.TABULAR, c.TORCH): [10, 10, 10]})
    rows, targets = c.summarize(runs)
    ours = next(r for r in rows if r["contender"] == c.OURS)
    assert ours["rows_per_s"] == 100
    assert ours["vs_reference"] == pytest.approx(0.9)  # the median of 0.9, 0.5 and 1.1
    verdicts = {(t["contender"], t["reference"]): t["verdict"] for t in targets}
    assert verdicts[c.OURS, c.PLAIN] == "met" and verdicts[c.OURS, c.TORCH] == "met"
    assert verdicts[c.ARROW, c.HF] == "-"  # nothing measured


def test_format_tables_notes_skipped_contenders():
    rows, targets = c.summarize(_runs({(c.RANDOM, c.ARROW): [50], (c.RANDOM, c.HF): [10]}))
    text = c.format_tables(rows, targets, [(c.TORCH, "torch is not importable")])
    assert "5.00" in text and "skipped torch per-sample: torch is not importable" in text


def test_batch_rows_counts_columns_and_pairs():
    assert c.batch_rows({"a": np.zeros(7), "b": np.zeros(7)}) == 7
    assert c.batch_rows((np.zeros((3, 2, 2)), np.zeros(3))) == 3


def test_parse_args_quick_sizes_and_refusals():
    args = c.parse_args(["--quick"])
    assert (args.rows, args.images, args.reps) == (100_000, 200, 1)
    assert c.parse_args(["--rows", "7000", "--images", "192"]).rows == 7000
    with pytest.raises(SystemExit):
        c.parse_args(["--images", "10"])


@needs_cv2
def test_the_image_transforms_crop_alike():
    data = jpegs(1)[0]
    decoded = DecodeCrop().apply({"image": data, "label": np.int32(3)})
    image = np.zeros((256, 256, 3), np.uint8)
    assert decoded[0].shape == Crop().apply((image, 3))[0].shape == (CROP_SIDE, CROP_SIDE, 3)
    assert decoded[1] == 3


def test_take_rows_gives_one_row_as_numpy_scalars():
    table = tabular(10)
    row = TakeRows(table)[4]
    assert len(TakeRows(table)) == 10 and set(row) == set(table.column_names)
    assert row["f0"] == table.column("f0")[4].as_py()
