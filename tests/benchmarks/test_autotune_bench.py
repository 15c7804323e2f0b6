"""benchmarks.autotune (``python -m benchmarks.autotune``): a short run end to end through ``main``,
and the summary's pairing, best-setting and verdict rules on made-up runs. No speed is asserted:
the machine is shared. The end-to-end run needs ``num_workers="auto"`` (its auto rows must have
no error)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import autotune
from benchmarks.autotune_report import TARGETS, best_fixed, format_tables, summarize
from benchmarks.autotune_runs import AUTO, WORKLOADS, Run, setting_options, settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ("0", "1", AUTO)
CHOSEN = ("tiny", "slow-consumer")


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("autotune") / "autotune.json"
    argv = ["--quick", "--reps", "1", "--seconds", "0.3", "--warmup", "0.2", "--workers", "0,1",
            "--workloads", ",".join(CHOSEN), "--json", str(out)]
    return argv, out


def test_a_short_run_reports_every_setting_and_target(short_run, capsys):
    argv, out = short_run
    code = autotune.main(argv)
    text = capsys.readouterr().out
    assert code == 0, text  # every run, auto's included, ran without an error
    for name in CHOSEN:
        block = text.split(f"{name}: {WORKLOADS[name].what}\n", 1)[1].split("\n\n", 1)[0]
        lines = block.splitlines()[2:]  # past the header and its rule
        assert [line.split()[0] for line in lines] == list(SETTINGS)
        assert "best fixed" in block and "<- auto" in block
    targets = text.split("targets (", 1)[1]
    for name in CHOSEN:
        for target in TARGETS:
            line = next(l for l in targets.splitlines() if l.startswith(name) and target.what in l)
            assert any(verdict in line for verdict in ("PASS", "FAIL", "n/a")), line
    saved = json.loads(out.read_text())
    runs = saved["runs"]
    assert sorted((r["workload"], r["setting"]) for r in runs) == sorted(
        (name, setting) for name in CHOSEN for setting in SETTINGS)
    for r in runs:
        assert r["error"] is None and r["rate"] > 0 and r["peak_pss_mib"] > 0 and r["batches"] > 0
        if r["setting"] == AUTO:
            assert r["num_workers"] is not None and r["settle_s"] is not None
            assert isinstance(r["tuning"], list)
        else:
            assert r["num_workers"] == int(r["setting"]) and r["settle_s"] is None
    assert len(saved["targets"]) == len(CHOSEN) * len(TARGETS)
    assert saved["options"]["workers"] == [0, 1] and "cpu" in saved["machine"]


def test_the_command_line_shows_the_options(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.autotune", "--help"], capture_output=True,
        text=True, timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    for option in ("--workloads", "--workers", "--reps", "--seconds", "--warmup", "--quick", "--json"):
        assert option in done.stdout


def test_options_quick_defaults_and_refusals(capsys):
    args = autotune.parse_args(["--quick"])
    assert (args.reps, args.seconds, args.warmup) == (1, 0.25, 0.2)
    assert args.workers[0] == 0 and len(args.workers) >= 3  # 0 .. 2 x usable CPUs
    assert autotune.parse_args(["--quick", "--reps", "2"]).reps == 2
    with pytest.raises(SystemExit):
        autotune.parse_args(["--workloads", "nope"])
    with pytest.raises(SystemExit):
        autotune.parse_args(["--seconds", "0"])
    assert "argument --seconds: expected a finite number > 0; got '0'" in capsys.readouterr().err


def test_settings_and_their_loader_options():
    assert settings([0, 2]) == ["0", "2", AUTO]
    assert setting_options("2") == {"num_workers": 2}
    assert setting_options(AUTO) == {"num_workers": "auto"}


def _run(workload, setting, rep, rate, pss=100.0, settle=(None, None)):
    return Run(workload, setting, rep, rate=rate, peak_pss_mib=pss, settle_s=settle[0],
               settle_batch=settle[1], num_workers=None if setting == AUTO else int(setting))


def test_summary_pairs_ratios_within_a_repetition_and_judges_the_targets():
    runs = [
        # loader-bound: 2 workers are the best fixed setting, 2x and 3x num_workers=0
        _run("w", "0", 0, 100), _run("w", "2", 0, 200), _run("w", AUTO, 0, 190, 105, (1.5, 300)),
        _run("w", "0", 1, 50), _run("w", "2", 1, 150), _run("w", AUTO, 1, 150, 120, (2.5, 150)),
        _run("w", "0", 2, 80), _run("w", "2", 2, 160), _run("w", AUTO, 2, 120, 100, (3.0, 500)),
    ]
    assert best_fixed(runs, "w") == "2"
    rows, targets = summarize(runs)
    auto = next(r for r in rows if r["setting"] == AUTO)
    assert auto["vs_best"] == pytest.approx(0.95)  # median of 0.95, 1.0, 0.75
    assert auto["vs_serial"] == pytest.approx(1.9)  # median of 1.9, 3.0, 1.5
    verdicts = {t["target"]: t["verdict"] for t in targets}
    assert verdicts == {"vs_best": "PASS", "vs_serial": "PASS", "memory": "PASS", "settle": "FAIL"}
    memory = next(t for t in targets if t["target"] == "memory")
    assert memory["ratio"] == pytest.approx(1.05)  # median of 1.05, 1.2, 1.0
    text = format_tables(rows, targets, {"w": "made up"})
    assert "w: made up" in text and "best fixed" in text and "0.95x" in text and "2.50 s, batch 300" in text  # medians


def test_serial_target_is_na_where_not_loader_bound_and_errors_show():
    runs = [_run("w", "0", 0, 100), _run("w", "1", 0, 110), _run("w", AUTO, 0, 100, settle=(0.0, 0)),
            Run("v", "0", 0, rate=10.0, peak_pss_mib=1.0), Run("v", AUTO, 0, error="Boom: no")]
    rows, targets = summarize(runs)
    by = {(t["workload"], t["target"]): t for t in targets}
    assert by["w", "vs_serial"]["verdict"] == "n/a" and "not loader-bound" in by["w", "vs_serial"]["value"]
    assert by["w", "settle"]["verdict"] == "PASS"
    assert by["v", "vs_best"]["verdict"] == "-" and "no auto run completed" in by["v", "vs_best"]["value"]
    assert "Boom: no" in format_tables(rows, targets, {})
