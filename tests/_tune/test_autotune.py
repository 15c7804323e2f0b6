"""``num_workers="auto"`` as a user meets it: the options it accepts and refuses, the decisions it
shows (``stats().tuning``, the stage table, the monitor's report, the Perfetto trace), and the real
policy on a real pool: a loader that waits on its data grows the pool, a pool with time to spare
shrinks, and a pickled loader tunes too.
"""

from __future__ import annotations

import json
import logging
import pickle
import time

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, Dataset, SequentialSampler, TuningChange
from dataloader._tune import policy as policy_module
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader.monitor import Recorder, _worker_seconds


class _Busy(Dataset):
    """Each sample spins the CPU for ``seconds`` (holding no lock: process workers scale)."""

    def __init__(self, length: int, seconds: float) -> None:
        self.length, self.seconds = length, seconds

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> np.ndarray:
        end = time.thread_time() + self.seconds
        while time.thread_time() < end:
            pass
        return np.full(4, index, dtype=np.int64)


def test_auto_is_accepted_and_a_wrong_spelling_is_refused_naming_the_choices():
    loader = DataLoader(ArrayDataset(np.arange(8)), batch_size=2, num_workers="auto")
    assert loader.num_workers == "auto"
    assert loader.options.tune_workers and loader.options.tune_depth
    with pytest.raises(ArgumentValueError, match=r"`num_workers` must be a non-negative integer or 'auto'; got 'Auto'"):
        DataLoader(ArrayDataset(np.arange(8)), num_workers="Auto")
    with pytest.raises(ArgumentValueError, match=r"got -1\. Or 'auto'"):
        DataLoader(ArrayDataset(np.arange(8)), num_workers=-1)
    with pytest.raises(ArgumentTypeError, match=r"`prefetch_factor` must be a positive integer; got 'many'\. Or 'auto'"):
        DataLoader(ArrayDataset(np.arange(8)), num_workers=2, prefetch_factor="many")
    with pytest.raises(ArgumentValueError, match=r"prefetch_factor='auto'.*num_workers=0 there are none"):
        DataLoader(ArrayDataset(np.arange(8)), prefetch_factor="auto")
    fixed_depth = DataLoader(ArrayDataset(np.arange(8)), num_workers="auto", prefetch_factor=3)
    assert fixed_depth.options.tune_workers and not fixed_depth.options.tune_depth
    depth_only = DataLoader(ArrayDataset(np.arange(8)), num_workers=2, prefetch_factor="auto")
    assert depth_only.options.tune_depth and not depth_only.options.tune_workers


def test_a_loader_that_waits_for_its_data_grows_its_pool(no_leaks):
    dataset = _Busy(400, 0.004)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), num_workers="auto",
                        multiprocessing_context="fork")
    batches = [batch[:, 0].tolist() for batch in loader]
    assert batches == [list(range(i, i + 4)) for i in range(0, 400, 4)]
    stats = loader.stats()
    assert stats.tuning[0].reason.startswith("start: 1 worker, prefetch 2")
    grown = [change for change in stats.tuning if "workers: the loop waited" in change.reason]
    # Whether it grows depends on idle CPUs (a busy machine has none): it must have looked, and
    # either grown or said nothing, never shrunk while the loop waited.
    assert all(change.workers >= 2 for change in grown)
    assert not [change for change in stats.tuning if "workers were" in change.reason]


def test_a_pool_with_time_to_spare_shrinks(no_leaks, tuned_every_batch, monkeypatch):
    monkeypatch.setattr(policy_module, "PATIENCE", 1)
    dataset = ArrayDataset(np.arange(200))
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), num_workers="auto",
                        multiprocessing_context="fork", persistent_workers=True)
    loader._pipeline._tuner.policy.settings = policy_module.Settings(3, 2)  # as if grown before
    shrunk: list = []
    for _ in range(3):  # a busy machine may spoil an epoch's windows; the pool must shrink in time
        for _ in loader:
            time.sleep(0.01)  # a training step far longer than making a batch of two numbers
        shrunk = [change for change in loader.stats().tuning if "workers were" in change.reason]
        if shrunk:
            break
    loader.close()
    assert shrunk and shrunk[0].workers < 3, loader.stats().tuning


def test_every_decision_is_in_stats_the_table_the_report_and_the_trace(
    no_leaks, tuned_every_batch, tmp_path, monkeypatch, caplog
):
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("DATALOADER_TRACE", str(trace))
    monkeypatch.setenv("DATALOADER_MONITOR", "1")
    monkeypatch.setenv("DATALOADER_MONITOR_FREQUENCY", "10")
    monkeypatch.setenv("DATALOADER_MONITOR_INTERVAL", "0")
    monkeypatch.setattr(policy_module, "PATIENCE", 1)
    dataset = ArrayDataset(np.arange(200))
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), num_workers="auto",
                        worker_type="thread")
    loader._pipeline._tuner.policy.settings = policy_module.Settings(3, 2)
    with caplog.at_level(logging.INFO, logger="dataloader"):
        for _ in loader:
            time.sleep(0.01)  # the loop's step: the three workers have time to spare
    stats = loader.stats()
    assert len(stats.tuning) >= 2, stats.tuning
    assert all(isinstance(change, TuningChange) for change in stats.tuning)
    latest = stats.tuning[-1]
    assert f"autotune: {len(stats.tuning)} decisions; latest: {latest.describe()}" in stats.table()
    assert stats.num_workers == latest.workers
    assert any("DataLoader autotune: 3 -> " in record.getMessage() for record in caplog.records)
    assert any("autotune: " in record.getMessage() and "stages after" in record.getMessage()
               for record in caplog.records)
    events = json.loads(trace.read_text())["traceEvents"]
    instants = [e for e in events if e["ph"] == "i" and e["name"].startswith("autotune: ")]
    assert [e["args"]["reason"] for e in instants] == [change.reason for change in stats.tuning]
    assert instants[0]["name"] == "autotune: 3 workers, prefetch 2"


def test_describe_puts_the_batch_and_time_after_the_change():
    change = TuningChange(140, 1.92, 3, 2, "2 -> 3 workers: the loop waited 38% of the last 2.0 s")
    assert change.describe() == "2 -> 3 workers at batch 140 (1.9 s): the loop waited 38% of the last 2.0 s"


def test_utilization_counts_the_workers_each_stretch_had():
    # 2 workers for 1 s, then 4 for 1 s: 6 worker-seconds; an epoch that started 0.5 s before.
    assert _worker_seconds([(10.0, 2), (11.0, 4)], 10.0, 12.0) == pytest.approx(6.0)
    assert _worker_seconds([(10.0, 2), (11.0, 4)], 9.5, 12.0) == pytest.approx(7.0)
    recorder = Recorder(2)
    recorder.tuned(TuningChange(0, 0.0, 2, 2, "start"))
    assert recorder.num_workers == 2


def test_a_pickled_auto_loader_tunes_its_own_pool(no_leaks):
    loader = DataLoader(ArrayDataset(np.arange(40)), batch_size=4, num_workers="auto", worker_type="thread")
    copy = pickle.loads(pickle.dumps(loader))
    assert copy.num_workers == "auto"
    assert [b.tolist() for (b,) in copy] == [b.tolist() for (b,) in loader]
    assert copy.stats().tuning[0].reason.startswith("start: 1 worker")
