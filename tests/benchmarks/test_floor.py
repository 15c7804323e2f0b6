"""benchmarks.floor (``python -m benchmarks.floor``): ratios are paired within a repetition, bad
options are refused, and quick runs print their table. No speed is asserted."""

from __future__ import annotations

import json

import pytest

from benchmarks import floor as bench_floor
from benchmarks.floor import FLOOR, NO_LOADER, OURS, Run


def test_ratios_are_paired_within_a_repetition():
    runs = [
        Run("images", NO_LOADER, 0, 100.0), Run("images", FLOOR, 0, 200.0, 50.0, 800.0),
        Run("images", OURS, 0, 120.0, 200.0, 1300.0),
        Run("images", NO_LOADER, 1, 50.0), Run("images", FLOOR, 1, 90.0, 60.0, 900.0),
        Run("images", OURS, 1, 70.0, 220.0, 1200.0),
    ]
    rows = {row["loader"]: row for row in bench_floor.summarize(runs)}
    assert rows[FLOOR]["vs_no_loader"] == pytest.approx(1.9)  # median of 2.0 and 1.8
    assert rows[OURS]["vs_no_loader"] == pytest.approx(1.3)  # median of 1.2 and 1.4
    assert rows[OURS]["main_us_per_batch"] == pytest.approx(210.0)
    assert rows[NO_LOADER]["main_us_per_batch"] is None
    table = bench_floor.format_table(list(rows.values()))
    assert "1.90" in table and "1.30" in table and "1250" in table


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit):
        bench_floor.parse_args(["--workloads", "decode"])
    assert "unknown workload" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_floor.parse_args(["--loaders", "ours,torch"])
    assert "unknown or no loader(s) ['torch']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_floor.parse_args(["--step-us", "-1"])
    assert "argument --step-us: expected a finite number >= 0; got '-1'" in capsys.readouterr().err


def test_a_run_of_some_loaders_measures_only_those(no_leaks, capsys):
    assert bench_floor.main(["--quick", "--seconds", "0.2", "--workloads", "tiny", "--loaders", "ours,no-loader"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [(row[0], row[1]) for row in rows] == [("tiny", "no-loader"), ("tiny", "ours")]
    assert float(rows[1][3]) > 0, "ours has no ratio to the plain loop"


def test_a_training_steps_cpu_is_left_out_of_the_main_process_figure(no_leaks, tmp_path, capsys):
    out = tmp_path / "floor.json"
    assert bench_floor.main(["--quick", "--seconds", "0.2", "--workloads", "tiny", "--loaders", "no-loader,ours",
                             "--step-us", "3000", "--json", str(out)]) == 0
    assert "a 3000 us step per batch" in capsys.readouterr().out
    (ours,) = [r for r in json.loads(out.read_text())["rows"] if r["loader"] == "ours"]
    # The step alone is 3,000 us of the main process's CPU per batch; the loader's share is far less.
    assert 0 < ours["main_us_per_batch"] < 1500


def test_quick_run_prints_every_row(no_leaks, tmp_path, capsys):
    out = tmp_path / "floor.json"
    assert bench_floor.main(["--quick", "--seconds", "0.2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for label in ("no-loader", "floor", "floor+main", "ours"):
        assert f" {label} " in text
    rows = json.loads(out.read_text())["rows"]
    assert {(r["workload"], r["loader"]) for r in rows} == {
        (w, l) for w in ("images", "tiny") for l in ("no-loader", "floor", "floor+main", "ours")
    }
    assert all(r["samples_per_s"] > 0 for r in rows)
