import json
import logging
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import (
    ArrayDataset, DataLoader, Dataset, Infinite, SequentialSampler, StreamDataset, StreamSampler, monitor,
)
from dataloader._stages.batch import StageTimes
from dataloader.monitor import MonitorSettings, Recorder, StageSummary, verdict

MODES = [
    pytest.param(dict(num_workers=0), id="serial"),
    pytest.param(dict(num_workers=2), id="process"),
    pytest.param(dict(num_workers=2, worker_type="thread"), id="thread"),
    pytest.param(dict(num_workers=2, preload=True), id="process-preload"),
]


class Numbers(StreamDataset):
    def __iter__(self):
        return iter(np.arange(40, dtype=np.int64))


class Slow(Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, index):
        time.sleep(0.002)
        return np.float32(index)


def loaders(kind, **options):
    if kind == "map":
        dataset = ArrayDataset(np.arange(40))
        return DataLoader(dataset, SequentialSampler(dataset, batch_size=4), **options)
    return DataLoader(Numbers(), StreamSampler(batch_size=4), **options)


def test_settings_from_env_and_megengine_aliases():
    assert MonitorSettings.from_env({}) == MonitorSettings(None, None)
    assert MonitorSettings.from_env({"DATALOADER_MONITOR": "1"}) == MonitorSettings(None, None, 10.0)
    assert MonitorSettings.from_env({"MGE_DATA_MONITOR": "1", "MGE_DATA_MONITOR_FREQUENCY": "3"}) == MonitorSettings(3)
    assert MonitorSettings.from_env({"DATALOADER_MONITOR": "0", "MGE_DATA_MONITOR": "1"}).log_every is None
    assert MonitorSettings.from_env({"DATALOADER_TRACE": "/tmp/x.json"}).trace_path == "/tmp/x.json"


@pytest.mark.parametrize("kind", ["map", "stream"])
@pytest.mark.parametrize("options", MODES)
def test_monitor_env_logs_the_stage_table_every_n_batches(kind, options, monkeypatch, caplog, no_leaks):
    monkeypatch.setenv("DATALOADER_MONITOR", "1")
    monkeypatch.setenv("DATALOADER_MONITOR_FREQUENCY", "4")
    parallel_stream = kind == "stream" and options.get("num_workers", 0) > 0
    loader = loaders(kind, parallel_stream=False, **options) if not parallel_stream else loaders(kind, **options)
    with caplog.at_level(logging.INFO, logger="dataloader"):
        batches = list(loader)
    assert len(batches) == 10
    reports = [r.getMessage() for r in caplog.records if "DataLoader stages after" in r.getMessage()]
    assert [r.split("\n")[0] for r in reports] == [
        "DataLoader stages after 4 batches (the last 4):",
        "DataLoader stages after 8 batches (the last 4):",
    ]
    assert "\n4 batches," in reports[-1]  # each report covers its window, not the whole epoch
    for stage in ("fetch", "transform", "collate", "wait"):
        assert f"\n{stage} " in reports[-1]
    assert "verdict:" in reports[-1]
    if options.get("num_workers"):
        assert "\ntransport " in reports[-1]


def test_settings_interval_and_frequency_from_env(caplog):
    on = {"DATALOADER_MONITOR": "1"}
    assert MonitorSettings.from_env({**on, "DATALOADER_MONITOR_INTERVAL": "2.5"}) == MonitorSettings(None, None, 2.5)
    assert MonitorSettings.from_env({**on, "DATALOADER_MONITOR_INTERVAL": "0"}).log_interval == 0.0
    both = MonitorSettings.from_env({**on, "DATALOADER_MONITOR_FREQUENCY": "5", "DATALOADER_MONITOR_INTERVAL": "1"})
    assert both == MonitorSettings(5, None, 1.0)
    assert MonitorSettings.from_env({"DATALOADER_MONITOR_INTERVAL": "1"}) == MonitorSettings(None, None)  # off
    for bad in ("soon", "-1", "inf", "nan"):
        with caplog.at_level(logging.WARNING, logger="dataloader"):
            assert MonitorSettings.from_env({**on, "DATALOADER_MONITOR_INTERVAL": bad}).log_interval == 10.0
        assert f"DATALOADER_MONITOR_INTERVAL={bad!r} is not a number of seconds >= 0; using 10" in caplog.text


def _reports(caplog):
    return [r for r in caplog.records if "DataLoader stages after" in r.getMessage()]


def _endless(dataset=None):
    dataset = ArrayDataset(np.arange(40)) if dataset is None else dataset
    return DataLoader(dataset, Infinite(SequentialSampler(dataset, batch_size=4)))


def test_monitor_on_an_endless_epoch_reports_by_time_not_by_batch(monkeypatch, caplog):
    """At the old default (every 10 batches) an endless epoch logged 9.7 MB in 3 minutes."""
    monkeypatch.setenv("DATALOADER_MONITOR", "1")
    monkeypatch.delenv("DATALOADER_MONITOR_FREQUENCY", raising=False)
    monkeypatch.delenv("MGE_DATA_MONITOR_FREQUENCY", raising=False)
    monkeypatch.delenv("DATALOADER_MONITOR_INTERVAL", raising=False)
    iterator = iter(_endless())
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="dataloader"):
        for _ in range(2000):
            next(iterator)
    iterator.close()
    assert time.monotonic() - started < 10  # within the first 10 s interval: no report yet
    assert _reports(caplog) == []


@pytest.mark.parametrize("frequency", [None, "1"])
def test_monitor_interval_spaces_the_reports(monkeypatch, caplog, frequency):
    monkeypatch.setenv("DATALOADER_MONITOR", "1")
    monkeypatch.setenv("DATALOADER_MONITOR_INTERVAL", "0.25")
    monkeypatch.delenv("MGE_DATA_MONITOR_FREQUENCY", raising=False)
    if frequency is None:
        monkeypatch.delenv("DATALOADER_MONITOR_FREQUENCY", raising=False)
    else:  # every batch, but at most once per interval
        monkeypatch.setenv("DATALOADER_MONITOR_FREQUENCY", frequency)
    iterator = iter(_endless(Slow()))  # 8 ms a batch: each window's batches are all kept
    batches = 0
    with caplog.at_level(logging.INFO, logger="dataloader"):
        deadline = time.monotonic() + 1.2
        while time.monotonic() < deadline:
            next(iterator)
            batches += 1
    iterator.close()
    reports = _reports(caplog)
    assert 2 <= len(reports) <= 5 < batches, (len(reports), batches)
    gaps = [b.created - a.created for a, b in zip(reports, reports[1:])]
    assert min(gaps) >= 0.2, gaps  # measured after each report is formatted, which takes a moment
    covered = [int(r.getMessage().split("(the last ")[1].split(")")[0]) for r in reports]
    after = [int(r.getMessage().split("after ")[1].split(" ")[0]) for r in reports]
    assert covered == [after[0]] + [b - a for a, b in zip(after, after[1:])]  # each its own window


def test_monitor_is_silent_by_default(monkeypatch, caplog):
    monkeypatch.delenv("DATALOADER_MONITOR", raising=False)
    monkeypatch.delenv("MGE_DATA_MONITOR", raising=False)
    with caplog.at_level(logging.INFO, logger="dataloader"):
        list(loaders("map"))
    assert not caplog.records


@pytest.mark.parametrize("options", MODES)
def test_stats_counts_batches_and_samples(options, no_leaks):
    loader = loaders("map", **options)
    iterator = iter(loader)
    list(iterator)
    stats = iterator.stats()
    assert stats.batches == 10 and stats.samples == 40
    assert stats.stages["fetch"].count == 10 and stats.stages["wait"].count == 10
    assert stats.samples_per_second > 0 and 0 <= stats.wait_fraction <= 1
    assert loader.stats().batches == 10
    if options.get("preload"):
        assert stats.stages["preload"].count == 10
    if options["num_workers"]:
        assert 0 < stats.worker_utilization <= 1


def test_stats_before_any_epoch_is_a_clear_error():
    with pytest.raises(RuntimeError, match="iterate the loader first"):
        loaders("map").stats()


@pytest.mark.parametrize("options", MODES[:3])
def test_trace_file_is_valid_trace_event_json_with_nested_stages(options, tmp_path, monkeypatch, no_leaks):
    path = tmp_path / "trace.json"
    monkeypatch.setenv("DATALOADER_TRACE", str(path))
    list(DataLoader(Slow(), SequentialSampler(Slow(), batch_size=4), **options))
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    expected_workers = {"main process"} if options["num_workers"] == 0 else {"worker 0", "worker 1"}
    assert names >= expected_workers | {"main: wait"}
    slices = [e for e in events if e["ph"] == "X"]
    assert all(isinstance(e["ts"], float) and e["dur"] >= 0 for e in slices)
    batches = [e for e in slices if e["name"].startswith("batch ")]
    assert len(batches) == 6
    for batch in batches:
        inner = [e for e in slices if e["tid"] == batch["tid"] and e["name"] in ("fetch", "transform", "collate")
                 and batch["ts"] <= e["ts"] and e["ts"] + e["dur"] <= batch["ts"] + batch["dur"] + 1e-3]
        assert {e["name"] for e in inner} == {"fetch", "transform", "collate"}
    fetches = [e for e in slices if e["name"] == "fetch"]
    assert min(e["dur"] for e in fetches) >= 4 * 2000 * 0.9  # four 2 ms samples per batch


@pytest.mark.parametrize("where", ["missing/trace.json", "."])
def test_trace_path_that_cannot_be_written_warns_as_the_epoch_starts(where, tmp_path, monkeypatch, caplog):
    # A missing directory (or a directory given as the file) is said when the epoch starts;
    # the epoch runs on without a trace instead of failing at its end.
    path = tmp_path / where
    monkeypatch.setenv("DATALOADER_TRACE", str(path))
    dataset = ArrayDataset(np.arange(8))
    with caplog.at_level(logging.WARNING, logger="dataloader"):
        iterator = iter(DataLoader(dataset, SequentialSampler(dataset, batch_size=4)))
        assert "runs without a trace" in caplog.text and str(path) in caplog.text
        assert [batch[0].tolist() for batch in iterator] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert not (tmp_path / "missing").exists()


def test_trace_write_failing_at_the_end_of_the_epoch_warns_instead_of_raising(tmp_path, monkeypatch, caplog):
    folder = tmp_path / "gone"
    folder.mkdir()
    monkeypatch.setenv("DATALOADER_TRACE", str(folder / "trace.json"))
    dataset = ArrayDataset(np.arange(8))
    iterator = iter(DataLoader(dataset, SequentialSampler(dataset, batch_size=4)))
    folder.rmdir()  # the directory goes away mid-epoch
    with caplog.at_level(logging.WARNING, logger="dataloader"):
        assert len(list(iterator)) == 2
    assert "could not write the trace" in caplog.text


def summary(total, count=10):
    return StageSummary(count, total, total / count, total / count, total / count)


def stats(wait, workers, utilization, **stages):
    return dict(wait_fraction=wait, num_workers=workers, worker_utilization=utilization,
                stages={name: summary(total) for name, total in stages.items()})


def test_verdict_consumer_bound():
    line = verdict(stats(0.02, 2, 0.3, fetch=1.0, collate=0.1), cores=8)
    assert line.startswith("consumer-bound") and "fewer may do" in line


def test_verdict_input_bound_raise_workers_names_cores():
    line = verdict(stats(0.41, 2, 0.97, fetch=3.0, transform=5.0, collate=0.1), cores=8)
    assert line.startswith("input-bound") and "raise num_workers (8 cores available" in line
    assert "transform dominates" in line and "41%" in line


def test_verdict_input_bound_on_all_cores_says_make_the_stage_cheaper():
    line = verdict(stats(0.5, 8, 0.95, fetch=9.0, transform=1.0), cores=8)
    assert "make fetch cheaper" in line


def test_verdict_transport_bound():
    line = verdict(stats(0.5, 2, 0.4, fetch=0.1, collate=0.1, transport=3.0), cores=8)
    assert line.startswith("transport-bound")


def test_verdict_stream_bound_when_reading_the_stream_here_costs_more_than_making_batches():
    line = verdict(stats(0.9, 2, 0.2, read=4.0, fetch=0.5, collate=0.5), cores=8)
    assert line.startswith("stream-bound") and "parallel_stream=True" in line
    assert verdict(stats(0.9, 0, None, read=0.1, fetch=2.0), cores=4).startswith("input-bound")


class SlowStream(StreamDataset):
    def __iter__(self):
        for i in range(32):
            time.sleep(0.002)
            yield np.int64(i)


@pytest.mark.parametrize("options", MODES)
def test_a_stream_read_in_this_process_is_the_read_stage(options, tmp_path, monkeypatch, no_leaks):
    path = tmp_path / "trace.json"
    monkeypatch.setenv("DATALOADER_TRACE", str(path))
    loader = DataLoader(SlowStream(), StreamSampler(batch_size=8), **options)
    assert [b.tolist() for b in loader] == [list(range(k, k + 8)) for k in range(0, 32, 8)]
    stats = loader.stats()
    read = stats.stages["read"]
    assert read.count == 4 and read.total >= 32 * 0.002 * 0.9  # eight 2 ms samples a batch
    assert list(stats.stages)[0] == "read" and stats.verdict.startswith("stream-bound")
    events = json.loads(path.read_text())["traceEvents"]
    assert len([e for e in events if e["ph"] == "X" and e["name"] == "read"]) == 4


def test_map_datasets_and_streams_read_by_workers_have_no_read_stage():
    dataset = ArrayDataset(np.arange(8))
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4))
    list(loader)
    assert "read" not in loader.stats().stages
    streamed = DataLoader(Numbers(), StreamSampler(batch_size=4), num_workers=2, parallel_stream=True)
    list(streamed)
    assert "read" not in streamed.stats().stages


def test_verdict_serial_input_bound():
    line = verdict(stats(0.7, 0, None, fetch=2.0), cores=4)
    assert line.startswith("input-bound") and "set num_workers" in line


def test_monitor_makes_its_reports_visible_without_logging_setup(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(
        "import numpy as np\n"
        "from dataloader import ArrayDataset, DataLoader, SequentialSampler\n"
        "d = ArrayDataset(np.arange(40))\n"
        "list(DataLoader(d, SequentialSampler(d, batch_size=4)))\n"
    )
    env = {"DATALOADER_MONITOR": "1", "DATALOADER_MONITOR_FREQUENCY": "5", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("DataLoader stages after") == 2 and "verdict:" in result.stderr


# -- bounded memory: older events folded into sums ----------------------------------------------


def _feed(recorder, events):
    """Record ``events``: (fetch, transform, collate, transport, wait, preload, samples) each."""
    clock = 0.0
    for index, (fetch, transform, collate, transport, wait, preload, samples) in enumerate(events):
        start = clock
        times = StageTimes(start, start + fetch, start + fetch + transform, start + fetch + transform + collate, samples)
        recorder.batch_made(index % 3, index, times, times.collated + transport, transport)
        recorder.waited(times.collated, times.collated + wait)
        recorder.preloaded(times.collated, times.collated + preload)
        recorder.read(start - fetch, start)  # the stream read that made the batch's task
        clock = times.collated + max(wait, preload)


_durations = st.floats(0.0, 1.0, allow_nan=False, allow_infinity=False)
_events = st.lists(st.tuples(_durations, _durations, _durations, _durations, _durations, _durations, st.integers(1, 64)), max_size=60)


@given(events=_events, keep=st.integers(1, 7), num_workers=st.sampled_from([0, 2]))
@settings(max_examples=60, deadline=None)
def test_folding_old_events_keeps_whole_epoch_counts_totals_and_means(events, keep, num_workers):
    folding, whole = Recorder(num_workers, keep=keep), Recorder(num_workers, keep=10**9)
    folding.started = whole.started = 0.0
    _feed(folding, events)
    _feed(whole, events)
    assert max(len(folding.batches), len(folding.waits), len(folding.preloads), len(folding.reads)) < 2 * keep
    got, want = folding.snapshot(), whole.snapshot()
    assert (got.batches, got.samples) == (want.batches, want.samples) == (len(events), sum(e[6] for e in events))
    assert sorted(got.stages) == sorted(want.stages)
    assert got.elapsed == pytest.approx(want.elapsed)
    assert got.wait_fraction == pytest.approx(want.wait_fraction)
    assert (got.worker_utilization is None) == (want.worker_utilization is None)
    if got.worker_utilization is not None:
        assert got.worker_utilization == pytest.approx(want.worker_utilization)
    for name, stage in got.stages.items():
        assert stage.count == want.stages[name].count
        assert stage.total == pytest.approx(want.stages[name].total, abs=1e-9)
        assert stage.mean == pytest.approx(want.stages[name].mean, abs=1e-9)
    # Percentiles cover the events still kept one by one: the latest of the epoch.
    kept_waits = sorted(stop - go for go, stop in folding.waits)
    if kept_waits:
        assert got.stages["wait"].p50 == kept_waits[(len(kept_waits) - 1) // 2]


@pytest.mark.parametrize("options", [pytest.param(dict(num_workers=0), id="serial"),
                                     pytest.param(dict(num_workers=2, prefetch_factor=2), id="process")])
def test_an_endless_epoch_records_in_bounded_memory(options, monkeypatch, no_leaks):
    """An Infinite sampler makes one epoch that never ends: its timings must not grow with it."""
    monkeypatch.setattr(monitor, "KEEP", 50)
    dataset = ArrayDataset(np.arange(40, dtype=np.float32))
    loader = DataLoader(dataset, Infinite(SequentialSampler(dataset, batch_size=4)), **options)
    with iter(loader) as batches:
        for _ in range(1000):
            batch = next(batches)
            assert len(batches.recorder.batches) < 100 and len(batches.recorder.waits) < 100
        stats = batches.stats()
    assert list(batch[0]) == [36.0, 37.0, 38.0, 39.0]
    # Batches count those handed out; samples and stage counts those made (workers run ahead).
    assert stats.batches == stats.stages["wait"].count == 1000
    made = stats.stages["fetch"].count
    assert 1000 <= made <= 1000 + 2 * 2 + 1 and stats.samples == 4 * made
