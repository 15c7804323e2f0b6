"""The packing bench: a tiny run end to end (with Grain or without it), and its pure helpers."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import packing as p
from benchmarks import packing_data as d
from benchmarks.packing_contenders import CONTENDERS, GRAIN_BF, OURS_BF, batch_padding, measure, missing

ROOT = Path(__file__).resolve().parents[2]


def test_a_tiny_run_reports_every_contender_padding_and_buckets(tmp_path):
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.packing", "--quick", "--samples", "300", "--every", "200",
         "--buffers", "4", "--max-tokens", "4096", "--json", str(out)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    ran = {row["contender"] for row in result["rows"]}
    for contender in CONTENDERS:  # each ran, or the output says why not
        assert (contender.name in ran) != (f"skipped {contender.name}: " in done.stdout)
    assert {c.name for c in CONTENDERS if not c.needs.startswith("grain")} <= ran  # ours always run
    assert {(r["distribution"], r["seq_len"], r["buffer"]) for r in result["rows"]} == {
        (name, 2048, 4) for name in d.DISTRIBUTIONS}
    for row in result["rows"]:
        assert 0 <= row["padding_fraction"] <= 1 and row["all_tokens"] and row["stats_agree"], row
        assert row["samples_per_s"] > 0 and row["tokens_per_s"] > 0
    assert len(result["targets"]) == 3 * len(d.DISTRIBUTIONS)
    assert all(t["verdict"] in ("met", "not met", "-") for t in result["targets"])
    assert [b["sampler"].split("(")[0] for b in result["buckets"]] == [
        "BucketSampler", "RandomSampler", "BucketSampler", "RandomSampler"] * len(d.DISTRIBUTIONS)
    assert all(0 <= b["padding_fraction"] <= 1 for b in result["buckets"])
    assert "padding ours best_fit <= grain best_fit" in done.stdout


def test_split_cuts_long_samples_into_seq_len_pieces_in_order():
    assert d.split(np.array([5, 10, 3, 12]), 5).tolist() == [5, 5, 5, 3, 5, 5, 2]
    assert d.split(np.array([1]), 8).tolist() == [1]


def test_samples_are_consecutive_int32_slices():
    samples = d.samples(np.array([3, 1, 2]))
    assert [s["tokens"].tolist() for s in samples] == [[0, 1, 2], [3], [4, 5]]
    assert samples[0]["tokens"].dtype == np.int32


def test_lognormal_has_the_stated_mean_and_a_long_tail():
    lengths = d.lognormal(200_000)
    assert abs(lengths.mean() - d.LOGNORMAL_MEAN) < 5 and lengths.max() > 4000 and lengths.min() >= 1
    assert (d.lognormal(10) == d.lognormal(10)).all()  # seeded


def test_cpython_defs_counts_the_tokens_of_real_definitions():
    lengths = d.cpython_defs(every=100)
    assert lengths.size > 10 and lengths.min() >= 1


def test_measure_counts_padding_from_segment_ids():
    rows = iter([{"tokens": np.arange(4), "tokens_segment_ids": np.array([1, 1, 2, 0], np.int32)},
                 {"tokens": np.arange(4), "tokens_segment_ids": np.array([1, 0, 0, 0], np.int32)}])
    done = measure(rows, 4)
    assert (done.rows, done.padding, done.tokens) == (2, 4, 4)


def test_batch_padding_pads_each_batch_to_its_longest():
    lengths = np.array([1, 3, 2, 2])
    found = batch_padding([[0, 1], [2, 3]], lengths)
    assert found["padding_fraction"] == pytest.approx(1 - 8 / 10)
    assert (found["batches"], found["mean_samples"]) == (2, 2.0)


def _run(contender, rep, seconds, padding):
    return p.Run("lognormal", 8, 2, contender, rep, 10, padding, 80 - padding, 80 - padding, seconds,
                 1 / seconds, 1 / seconds, None if contender == GRAIN_BF else padding)


def test_summarize_pairs_speedups_and_judges_the_targets():
    runs = [_run(GRAIN_BF, 0, 1.0, 8), _run(OURS_BF, 0, 0.25, 4),
            _run(GRAIN_BF, 1, 2.0, 8), _run(OURS_BF, 1, 1.5, 4)]
    rows, targets = p.summarize(runs)
    ours = next(r for r in rows if r["contender"] == OURS_BF)
    assert ours["padding_fraction"] == pytest.approx(4 / 80)
    assert ours["vs_grain"] == pytest.approx((4 + 2 / 1.5) / 2)  # the median of 4x and 1.33x
    assert ours["stats_agree"] and ours["all_tokens"]
    # padding 5% <= 10%; first fit not run; best fit 2.67x >= 2
    assert [t["verdict"] for t in targets] == ["met", "-", "met"]
    runs[1].seconds = runs[3].seconds = 1.9  # 0.53x and 1.05x
    assert [t["verdict"] for t in p.summarize(runs)[1]] == ["met", "-", "not met"]
    runs[1].reported_padding = 5  # stats() said otherwise than the rows
    assert not next(r for r in p.summarize(runs)[0] if r["contender"] == OURS_BF)["stats_agree"]


def test_missing_names_what_is_not_importable():
    absent = CONTENDERS[0].__class__("x", "no_such_module_here:Thing", CONTENDERS[0].rows)
    assert missing(absent) == "no_such_module_here.Thing is not importable"
