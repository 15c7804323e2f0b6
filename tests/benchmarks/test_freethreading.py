"""benchmarks.freethreading (``python -m benchmarks.freethreading``): a short run end to end with
this interpreter standing in for both 3.14t and 3.14, the tokenizer workload, the summary's
pairing and verdicts on made-up runs, and a missing interpreter skipped. No speed is asserted:
the machine is shared."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from benchmarks import freethreading
from benchmarks.freethreading_report import TARGETS, format_tables, headline, summarize
from benchmarks.freethreading_runs import CONFIGS, FT, GIL, Run, candidates
from benchmarks.freethreading_workloads import TOKENS, WORKLOADS, TextDataset, Tokenize, vocabulary

LABELS = [c.label for c in CONFIGS]


def test_a_short_run_reports_every_configuration_and_target(tmp_path, capsys):
    out = tmp_path / "ft.json"
    code = freethreading.main([
        "--quick", "--seconds", "0.1", "--warmup", "0.1", "--workloads", "tokenize",
        "--python-ft", sys.executable, "--python-gil", sys.executable, "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text  # every run ended without an error
    assert text.count("(a stand-in)") == 2 - sys.version.startswith("3.14")
    block = text.split(f"tokenize: {WORKLOADS['tokenize'].what}\n", 1)[1].split("\n\n", 1)[0]
    lines = block.splitlines()[2:]  # past the header and its rule
    assert [line.split(None, 1)[1].split("  ")[0] for line in lines] == LABELS
    targets = text.split("targets (", 1)[1]
    for target in TARGETS:
        line = next(l for l in targets.splitlines() if target.what in l)
        assert any(verdict in line for verdict in ("PASS", "FAIL", "n/a")), line
    assert "8 workers not run" in targets and "ratios (3.14t threads" in text
    saved = json.loads(out.read_text())
    assert sorted((r["role"], r["worker_type"]) for r in saved["runs"]) == sorted(
        (c.role, c.worker_type) for c in CONFIGS)
    for r in saved["runs"]:
        assert r["error"] is None and r["rate"] > 0 and r["peak_pss_mib"] > 0 and r["batches"] > 0
        assert r["python"] == sys.version.split()[0] and r["leftover_processes"] == 0
        assert (r["start_method"] is None) == (r["worker_type"] == "thread")
    assert {r["config"] for r in saved["rows"]} == set(LABELS)
    assert len(saved["ratios"]) == 1 and saved["ratios"][0]["vs_ft_processes"] > 0
    assert set(saved["interpreters"]) == {FT, GIL} and "cpu" in saved["machine"]
    assert len(saved["targets"]) == 3  # speed and memory at 2 workers; the 8-worker one n/a


def test_a_missing_interpreter_is_skipped_with_the_reason(tmp_path, capsys):
    code = freethreading.main(["--quick", "--workloads", "tiny", "--python-ft",
                               str(tmp_path / "no-python"), "--python-gil", str(tmp_path / "none")])
    text = capsys.readouterr().out
    assert code == 0
    assert "no free-threaded Python 3.14t to run" in text and "its rows are skipped" in text
    assert "no Python 3.14 (GIL) to run" in text and "cannot be run" in text
    assert "tiny:" not in text  # no rows


def test_options_quick_defaults_and_refusals(capsys):
    args = freethreading.parse_args(["--quick"])
    assert (args.reps, args.seconds, args.warmup, args.workers) == (1, 0.3, 0.3, [2])
    assert freethreading.parse_args([]).workloads == list(WORKLOADS)
    with pytest.raises(SystemExit):
        freethreading.parse_args(["--workers", "0,2"])
    assert "--workers: give counts >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        freethreading.parse_args(["--workloads", "nope"])


def test_candidates_are_where_ci_run_looks(monkeypatch, tmp_path):
    python = tmp_path / "versions" / "3.14.4t" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    assert str(python) in candidates(FT)


def test_the_tokenizer_gives_known_ids_and_pieces_of_unknown_words():
    words = vocabulary()
    assert 0 not in words.values() and 1 not in words.values()  # padding and unknown
    tokenize = Tokenize(words, length=8)
    known = next(w for w in words if len(w) > 4 and not w.startswith("##"))
    ids, label = tokenize.apply((f"{known.capitalize()}, bazu!", 7))
    assert label == 7 and ids.dtype == np.int32 and ids.shape == (8,)
    assert list(ids) == [words[known], words["ba"], words["##zu"], 0, 0, 0, 0, 0]
    ids, _ = tokenize.apply(("q" * 20, 0))  # no piece covers "q": unknown, truncated
    assert list(ids) == [1] * 8
    sample = TextDataset(10, 4)[5]
    ids, _ = Tokenize(words).apply(sample)
    assert ids.shape == (TOKENS,) and (ids > 1).sum() > 50 and sample[1] == 5


def _run(workers, config, rep, rate, pss=100.0, gil=False, workload="tokenize"):
    return Run(workload, workers, config.role, config.worker_type, rep, rate=rate,
               peak_pss_mib=pss, gil_enabled=gil)


def test_summary_pairs_ratios_within_a_repetition_and_judges_the_targets():
    threads, processes, gil = CONFIGS
    runs = [
        _run(8, threads, 0, 300, 50), _run(8, processes, 0, 200, 100), _run(8, gil, 0, 150, 120),
        _run(8, threads, 1, 150, 70), _run(8, processes, 1, 150, 100), _run(8, gil, 1, 100, 120),
        _run(8, threads, 2, 260, 50), _run(8, processes, 2, 200, 100), _run(8, gil, 2, 200, 100),
    ]
    rows, targets = summarize(runs)
    by = {t["target"]: t for t in targets}
    assert by["speed"]["ratio"] == pytest.approx(1.3)  # median of 1.5, 1.0, 1.3
    assert by["speed"]["verdict"] == "PASS" and by["python"]["verdict"] == "PASS"
    assert by["memory"]["ratio"] == pytest.approx(0.5) and by["memory"]["verdict"] == "PASS"
    ratios = headline(rows)
    assert ratios[0]["vs_gil_processes"] == pytest.approx(1.5)  # median of 2.0, 1.5, 1.3
    assert ratios[0]["pss_vs_gil_processes"] == pytest.approx(0.5)  # of 0.417, 0.583, 0.5
    threads_row = next(r for r in rows if r["config"] == threads.label)
    assert threads_row["threads_vs_this"] is None  # no ratio of a run to itself
    assert "tokenize at 8 workers" in format_tables(rows, targets, {"tokenize": "made up"})


def test_verdicts_fail_below_the_targets_and_flag_a_gil_that_was_on():
    threads, processes, _ = CONFIGS
    runs = [_run(2, threads, 0, 90, 80, gil=True, workload="tiny"),
            _run(2, processes, 0, 100, 100, gil=True, workload="tiny"),
            Run("decode", 2, FT, "thread", 0, error="exit code 1: Boom")]
    rows, targets = summarize(runs)
    by = {(t["workload"], t["target"]): t for t in targets}
    assert by["tiny", "speed"]["verdict"] == "FAIL" and by["tiny", "memory"]["verdict"] == "FAIL"
    assert "not a free-threaded measure" in by["tiny", "speed"]["value"]
    assert by["decode", "speed"]["verdict"] == "-"
    assert "Boom" in format_tables(rows, targets, {})
