"""The remote-data bench: a tiny run end to end (moto's server, the proxies, every contender), and
its pure helpers on made-up runs. No speed is asserted."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import remote as r
from benchmarks.remote_contenders import (
    LOCAL, OURS, PARQUET, STREAMING, TAR, WDS, batch_rows, contenders, environment, missing,
)
from benchmarks.remote_data import CROP_SIDE, decode_crop, jpeg, tar_samples, write_data

ROOT = Path(__file__).resolve().parents[2]
SERVER_MODULES = ("moto", "flask", "flask_cors", "boto3")

# The bench's images are written and decoded with OpenCV, which the test extra installs below
# Python 3.14 only (no wheel for free-threaded 3.14t).
needs_cv2 = pytest.mark.skipif(importlib.util.find_spec("cv2") is None,
                               reason="the bench uses OpenCV (opencv-python-headless), not installed here")


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in SERVER_MODULES),
                    reason="moto's S3 server cannot run (moto[s3], flask, flask-cors: the test extra)")
@needs_cv2
def test_a_tiny_run_measures_every_contender_at_every_place(tmp_path):
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.remote", "--quick", "--files", "2", "--rows", "4000",
         "--images", "48", "--shards", "2", "--latencies", "0,5", "--cache-latency", "5",
         "--workers", "0", "--json", str(out)],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    places = {(row["workload"], row["reader"], row["mode"], row["place"]) for row in report["rows"]}
    for c in contenders():
        if missing(c):
            assert f"skipped {c.workload} {c.reader} {c.mode}" in done.stdout
        elif c.mode == "cold":
            assert {(c.workload, c.reader, "cold", p) for p in (LOCAL, "s3 0 ms", "s3 5 ms")} <= places
        else:
            assert (c.workload, c.reader, "cached", "s3 5 ms") in places
    rows = {(row["workload"], row["rows"]) for row in report["rows"]}
    assert rows == {(PARQUET, 4000), (TAR, 48)} or rows == {(PARQUET, 4000)}  # every row, once an epoch
    assert done.stdout.count(">= ") == sum(t.minimum is not None for t in r.targets(5))
    assert "not run: litdata" in done.stdout
    assert not list(Path("/dev/shm").glob("*_locals")), "MosaicML streaming left its shared memory behind"


def _run(workload, reader, mode, place, rep, rows_per_s):
    return r.Run(workload, reader, mode, place, rep, 1000, 0.1, 1000 / rows_per_s, 0.0, 0)


def test_summarize_pairs_ratios_within_a_repetition():
    runs = [_run(TAR, OURS, "cold", LOCAL, rep, v) for rep, v in enumerate([100, 200, 300])]
    runs += [_run(TAR, OURS, "cold", "s3 20 ms", rep, v) for rep, v in enumerate([90, 100, 330])]
    runs += [_run(TAR, WDS, "cold", "s3 20 ms", rep, v) for rep, v in enumerate([45, 50, 165])]
    rows, goals = r.summarize(runs, 20)
    remote = next(row for row in rows if row["reader"] == OURS and row["place"] == "s3 20 ms")
    assert remote["rows_per_s"] == pytest.approx(100)
    assert remote["vs_local"] == pytest.approx(0.9)  # the median of 0.9, 0.5 and 1.1
    assert remote["vs_webdataset"] == pytest.approx(2.0)
    verdicts = {(g["workload"], g["contender"], g["reference"]): g["verdict"] for g in goals}
    assert verdicts[TAR, "ours cold s3 20 ms", "ours cold local"] == "met"
    assert verdicts[TAR, "ours cold s3 20 ms", "webdataset cold s3 20 ms"] == "met"
    assert verdicts[PARQUET, "ours cold s3 20 ms", "ours cold local"] == "-"  # nothing measured
    runs += [_run(TAR, STREAMING, "cold", "s3 20 ms", rep, v) for rep, v in enumerate([30, 25, 110])]
    peer = next(g for g in r.summarize(runs, 20)[1] if g["reference"] == "streaming cold s3 20 ms")
    assert peer["ratio"] == pytest.approx(3.0) and peer["target"] is None and peer["verdict"] == "-"
    assert "MISSED" in r.format_tables(rows, [{**goals[0], "ratio": 0.5, "verdict": r.evaluate(0.5, 0.8)}])


def test_steady_rate_leaves_the_first_batch_out():
    run = r.Run(PARQUET, OURS, "cold", LOCAL, 0, 1100, 0.0, 2.0, 1.0, 100)
    assert run.rows_per_s == 550 and run.steady_rows_per_s == 1000


@needs_cv2
def test_decode_crop_and_batch_rows():
    image, label = decode_crop({"jpg": jpeg(np.random.default_rng(1)), "cls": b"7"})
    assert image.shape == (CROP_SIDE, CROP_SIDE, 3) and label == 7
    assert batch_rows({"a": np.zeros(5)}) == 5 and batch_rows((np.zeros((3, 2)), np.zeros(3))) == 3


@needs_cv2
def test_tar_samples_reads_back_every_sample_in_order(tmp_path):
    data = write_data(tmp_path, 1, 8, 20, 2)  # what write_mds converts
    samples = [sample for name in data.shards for sample in tar_samples(data.tar / name)]
    assert [label for _, label in samples] == [i % 10 for i in range(20)]
    assert decode_crop({"jpg": samples[-1][0], "cls": samples[-1][1]})[0].shape == (CROP_SIDE, CROP_SIDE, 3)


def test_environment_is_restored():
    name = "BENCH_REMOTE_TEST_VARIABLE"
    with environment({name: "set", "HOME": "elsewhere"}):
        assert os.environ[name] == "set"
    assert name not in os.environ and os.environ.get("HOME") != "elsewhere"


def test_parse_args_quick_sizes_and_refusals():
    args = r.parse_args(["--quick"])
    assert (args.files, args.rows, args.images, args.shards, args.reps) == (4, 400_000, 640, 4, 1)
    with pytest.raises(SystemExit):
        r.parse_args(["--files", "4", "--rows", "10"])
