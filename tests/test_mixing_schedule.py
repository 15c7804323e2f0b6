"""MixedStream weights that change: piecewise and callable schedules of the count of items drawn
(exact switches, the shares per window, the count carried across epochs, the same items for any
worker count, exact resume around a change point, the fingerprint) and ``reweight=True``."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import ArrayDataset, DataLoader, MixedStream, StreamDataset, StreamSampler, WeightSchedule
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader.mixing import _schedule

A, B = ArrayDataset(np.arange(0, 300)), ArrayDataset(np.arange(1000, 1300))
FLIP = [(0, [1, 0]), (100, [0, 1]), (200, [1, 1])]  # A only, then B only, then both


class Counter(StreamDataset):
    """A stream of ``count`` ints from ``first``, resumable by its own state (read so far)."""

    def __init__(self, first: int, count: int) -> None:
        self.first, self.count, self._read, self._start = first, count, 0, 0

    def __iter__(self):
        self._read = self._start
        self._start = 0
        while self._read < self.count:
            self._read += 1
            yield self.first + self._read - 1

    def state_dict(self) -> dict:
        return {"read": self._read}

    def load_state_dict(self, state: dict) -> None:
        self._start = state["read"]


def ids(items) -> list[int]:
    return [int(item[0]) if isinstance(item, tuple) else int(item) for item in items]


def within(count: int, n: int, p: float, sigmas: float = 6.0) -> bool:
    """``count`` successes of ``n`` draws of probability ``p`` lie within ``sigmas`` deviations."""
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p)) + 1e-9


def test_a_piecewise_schedule_switches_exactly_at_its_change_points():
    mix = MixedStream([A, B], FLIP, seed=3)
    got = ids(mix)
    assert all(i < 1000 for i in got[:100]) and all(i >= 1000 for i in got[100:200])
    assert sorted(got) == list(range(300)) + list(range(1000, 1300))  # all_exhausted: each once
    assert 30 < sum(i >= 1000 for i in got[200:300]) < 70  # both again after 200


@pytest.mark.parametrize("weights", [
    [(0, [4, 1]), (4096, [1, 4]), (8000, {"1": 1, "0": 1})],
    lambda drawn: [4, 1] if drawn < 4096 else ([1, 4] if drawn < 8000 else [1, 1]),
], ids=["piecewise", "callable"])
def test_counts_per_window_follow_the_schedule(weights):
    # 6 sigma per window: 2e-9 to fail by chance. The callable's 8000 is not a multiple of 64:
    # its weights change at 8000 - 8000 % 64 + 64 = 8000 + 64, so the last window starts there.
    mix = MixedStream([Counter(0, 20000), Counter(100000, 20000)], weights, seed=11)
    got = np.array(ids(x for _, x in zip(range(12000), mix)))
    late = 8000 if isinstance(weights, list) else 8064
    for lo, hi, p in [(0, 4096, 0.2), (4096, 8000, 0.8), (late, 12000, 0.5)]:
        assert within(int((got[lo:hi] >= 100000).sum()), hi - lo, p), (lo, hi)


def test_a_callable_is_called_once_per_chunk_at_counts_aligned_to_it():
    calls: list[int] = []

    def schedule(drawn: int) -> list[float]:
        calls.append(drawn)
        return [1, 1]

    mix = MixedStream([A, B], schedule)
    calls.clear()  # the fingerprint's probes, if any were made
    assert len(ids(mix)) == 600
    assert calls == list(range(0, 600, _schedule.CHUNK))


def test_the_count_carries_from_epoch_to_epoch_and_ends_where_no_source_has_weight():
    small_a, small_b = ArrayDataset(np.arange(0, 100)), ArrayDataset(np.arange(1000, 1100))
    mix = MixedStream([small_a, small_b], [(0, [1, 1]), (200, [1, 0]), (300, [0, 1]), (400, [1, 0])])
    first = ids(mix)
    assert len(first) == 200 and mix.drawn == 200
    second = ids(mix)  # drawn 200..300: A only, then 300..400: B only
    assert all(i < 1000 for i in second[:100]) and all(i >= 1000 for i in second[100:])
    assert len(second) == 200 and mix.drawn == 400
    third = ids(mix)  # drawn 400 on: A only; when A runs out, B has weight 0: the epoch ends
    assert sorted(third) == list(range(100)) and mix.drawn == 500
    assert [s.exhausted for s in mix.stats().sources] == [True, False]


def test_stats_and_weights_report_the_weights_in_force():
    mix = MixedStream({"a": A, "b": B}, FLIP)
    assert mix.weights == {"a": 1.0, "b": 0.0} and [s.weight for s in mix.stats().sources] == [1.0, 0.0]
    items = iter(mix)
    for _ in range(150):
        next(items)
    assert mix.weights == {"a": 0.0, "b": 1.0} and mix.stats().drawn == 150
    assert [s.weight for s in mix.stats().sources] == [0.0, 1.0]


def loader_ids(loader) -> list[int]:
    return [int(i) for batch in loader for i in batch[0]]


def hold(drawn: int) -> list[float]:  # module level: spawned and forkserver workers unpickle it
    return [1, 3] if drawn >= 128 else [3, 1]


@pytest.mark.parametrize("weights", [FLIP, hold], ids=["piecewise", "callable"])
def test_the_same_items_for_zero_one_and_two_workers(weights, no_leaks):
    def run(workers: int) -> list[list[int]]:
        mix = MixedStream([A, B], weights, seed=5)
        loader = DataLoader(mix, StreamSampler(batch_size=32), num_workers=workers)
        return [loader_ids(loader) for _ in range(2)]  # two epochs: the count goes on

    serial = run(0)
    assert sorted(serial[0]) == sorted(serial[1]) == list(range(300)) + list(range(1000, 1300))
    assert serial[0] != serial[1]
    assert run(1) == serial and run(2) == serial


def test_parallel_stream_counts_per_worker_and_needs_persistent_workers_for_a_later_epoch(no_leaks):
    def loader(persistent: bool) -> DataLoader:
        mix = MixedStream([A, B], hold, seed=5)
        return DataLoader(mix, StreamSampler(batch_size=16), num_workers=2, parallel_stream=True,
                          persistent_workers=persistent)

    kept = loader(True)
    try:
        first = [loader_ids(kept) for _ in range(2)]
    finally:
        kept.close()
    again = loader(True)
    try:
        assert [loader_ids(again) for _ in range(2)] == first  # deterministic
    finally:
        again.close()
    assert sorted(first[1]) == list(range(300)) + list(range(1000, 1300))
    fresh = loader(False)
    assert loader_ids(fresh) == first[0]  # epoch 0: every worker counts from 0
    with pytest.raises(ArgumentValueError, match="persistent_workers=True"):
        loader_ids(fresh)  # epoch 1 in workers started afresh: the count is not known there


@pytest.mark.parametrize("cut", [0, 57, 99, 100, 101, 199, 200, 201, 450])
def test_a_resume_before_at_and_after_a_change_point_is_exact(cut):
    whole = MixedStream([A, B], FLIP, seed=2)
    expected = [ids(whole), ids(whole)]  # two epochs
    first = MixedStream([A, B], FLIP, seed=2)
    head = ids(first)  # epoch 0 whole, then part of epoch 1: the state carries the count
    items = iter(first)
    taken = ids(next(items) for _ in range(cut))
    state = json.loads(json.dumps(first.state_dict()))
    assert state["drawn"] == 600 + cut and state["draws"] == cut
    resumed = MixedStream([A, B], FLIP, seed=2)
    resumed.set_epoch(1)
    resumed.load_state_dict(state)
    assert resumed.drawn == 600 + cut
    assert head == expected[0] and taken + ids(resumed) == expected[1]


@pytest.mark.parametrize("cut", [3, 4, 5])  # batches of 20: the change point at 100 is batch 5
def test_a_loader_with_workers_resumes_around_a_change_point(cut, no_leaks):
    def loader() -> DataLoader:
        return DataLoader(MixedStream([A, B], FLIP, seed=8), StreamSampler(batch_size=20), num_workers=2)

    full = loader()
    expected = loader_ids(full), loader_ids(full)
    first = loader()
    assert loader_ids(first) == expected[0]
    batches = iter(first)
    head = [int(i) for _ in range(cut) for i in next(batches)[0]]
    state = first.state_dict()
    del batches
    first.close()
    resumed = loader()
    resumed.load_state_dict(state)
    assert head + loader_ids(resumed) == expected[1]


@settings(max_examples=30, deadline=None)
@given(points=st.lists(st.integers(1, 700), min_size=0, max_size=4, unique=True),
       weights=st.lists(st.tuples(st.floats(0.1, 4), st.floats(0.1, 4)), min_size=5, max_size=5),
       cut=st.integers(0, 650), seed=st.integers(0, 2**32 - 1))
def test_a_resume_anywhere_in_a_random_schedule_is_exact(points, weights, cut, seed):
    steps = [(at, list(w)) for at, w in zip([0, *sorted(points)], weights)]
    whole = ids(MixedStream([A, B], steps, seed=seed))
    assert sorted(whole) == list(range(300)) + list(range(1000, 1300))
    first = MixedStream([A, B], steps, seed=seed)
    items = iter(first)
    head = ids(x for _, x in zip(range(cut), items))
    again = MixedStream([A, B], WeightSchedule(steps), seed=seed)
    again.load_state_dict(pickle.loads(pickle.dumps(first.state_dict())))
    assert head + ids(again) == whole


def probe(drawn: int) -> list[float]:
    return [1, 2]


def probed(drawn: int) -> list[float]:
    return [1, 2]


probed.order_fingerprint = lambda: {"version": 3}  # type: ignore[attr-defined]


def test_the_fingerprint_holds_the_schedule():
    plain = MixedStream([A, B], [1, 2]).order_fingerprint()["weights"]
    assert plain == [1.0, 2.0]  # as before schedules: old states still load
    piecewise = MixedStream([A, B], FLIP).order_fingerprint()["weights"]
    assert piecewise == {"piecewise": [[0, [1.0, 0.0]], [100, [0.0, 1.0]], [200, [1.0, 1.0]]]}
    assert MixedStream([A, B], WeightSchedule(FLIP)).order_fingerprint()["weights"] == piecewise
    called = MixedStream([A, B], probe).order_fingerprint()["weights"]
    assert called["callable"].endswith("test_mixing_schedule.probe") and len(called["values"]) == 16
    other = MixedStream([A, B], lambda drawn: [1, 3]).order_fingerprint()["weights"]
    assert other["values"] != called["values"]  # other values at the probes
    own = MixedStream([A, B], probed).order_fingerprint()["weights"]
    assert own["fingerprint"] == {"version": 3} and "values" not in own
    state = MixedStream([A, B], FLIP).state_dict()
    with pytest.raises(ArgumentValueError, match=r"weights.*reweight=True"):
        MixedStream([A, B], [(0, [1, 0]), (101, [0, 1]), (200, [1, 1])]).load_state_dict(state)


def test_reweight_loads_a_state_of_other_weights_and_loses_and_repeats_nothing():
    m = ArrayDataset(np.arange(200000, 200300))
    old = MixedStream({"a": Counter(0, 3000), "b": Counter(100000, 3000), "m": m}, [1, 1, 1], seed=9)
    items = iter(old)
    head = ids(next(items) for _ in range(900))
    state = json.loads(json.dumps(old.state_dict()))
    new_weights = [(0, [0, 1, 0]), (1500, [9, 1, 0]), (3000, [1, 1, 1])]  # from drawn 900: b only
    fresh = MixedStream({"a": Counter(0, 3000), "b": Counter(100000, 3000), "m": m}, new_weights, seed=9)
    with pytest.raises(ArgumentValueError, match=r"weights="):
        fresh.load_state_dict(state)  # the refusal names the field
    fresh.load_state_dict(state, reweight=True)
    tail = ids(fresh)
    assert sorted(head + tail) == [*range(3000), *range(100000, 103000), *range(200000, 200300)]
    assert all(100000 <= i < 103000 for i in tail[:600])  # drawn 900..1500: b only
    window = np.array(tail[600:2100])  # drawn 1500..3000: a 0.9, b 0.1, m 0 (a and b last)
    assert within(int((window >= 100000).sum()), 1500, 0.1) and not (window >= 200000).any()
    again = MixedStream({"a": Counter(0, 3000), "b": Counter(100000, 3000), "m": m}, new_weights, seed=9)
    again.load_state_dict(state, reweight=True)
    assert ids(again) == tail  # deterministic


def test_reweight_still_refuses_other_sources_stop_or_seed():
    state = MixedStream([A, B], [1, 1], seed=1).state_dict()
    for other, field in [(MixedStream([A, B], [2, 1], seed=2), "seed"),
                         (MixedStream([A, B], [2, 1], seed=1, stop="never"), "stop"),
                         (MixedStream([A, ArrayDataset(np.arange(5))], [2, 1], seed=1), "sources")]:
        with pytest.raises(ArgumentValueError, match=rf"{field}"):
            other.load_state_dict(state, reweight=True)


@pytest.mark.parametrize("weights,error,message", [
    ([(5, [1, 1])], ArgumentValueError, r"pair 0 is at drawn=5; the first pair must be at drawn=0"),
    ([(0, [1, 1]), (10, [1, 2]), (10, [2, 1])], ArgumentValueError, r"pair 2 is at drawn=10, not after pair 1"),
    ([(0, [1, 1]), (-3, [1, 2])], ArgumentValueError, r"pair 1: drawn must be an integer >= 0"),
    ([(0, [1, 1]), (1.5, [1, 2])], ArgumentValueError, r"pair 1: drawn must be an integer"),
    ([(0, [1, 1]), [7]], ArgumentTypeError, r"pair 1 must be a \(drawn, weights\) pair"),
    ([(0, [1, 1]), (7, [1])], ArgumentValueError, r"pair 1 \(drawn=7\): `weights` must give one weight per source"),
    ([(0, [1, 1]), (7, [0, 0])], ArgumentValueError, r"pair 1 \(drawn=7\): `weights` are all 0"),
])
def test_bad_schedules_are_clear_errors(weights, error, message):
    with pytest.raises(error, match=message):
        MixedStream([A, B], weights)


def test_a_callable_that_returns_bad_weights_names_the_call():
    mix = MixedStream([A, B], lambda drawn: [1, 1] if drawn < 64 else [1, -1])
    with pytest.raises(ArgumentValueError, match=r"<lambda>\(64\): `weights\['1'\]` must be a number >= 0"):
        ids(mix)
    with pytest.raises(ArgumentTypeError, match="non-empty list of"):
        WeightSchedule([])


def test_an_edited_count_is_refused():
    mix = MixedStream([A, B], FLIP)
    items = iter(mix)
    next(items)
    state = mix.state_dict()
    state["drawn"] = 0
    with pytest.raises(ArgumentValueError, match=r"state\['drawn'\] \(0\) is less than"):
        MixedStream([A, B], FLIP).load_state_dict(state)


def test_a_loader_with_reweight_goes_on_under_the_new_weights(no_leaks):
    def loader(weights) -> DataLoader:
        return DataLoader(MixedStream([A, B], weights, seed=8), StreamSampler(batch_size=20), num_workers=2)

    first = loader([1, 1])
    batches = iter(first)
    head = [int(i) for _ in range(5) for i in next(batches)[0]]
    state = first.state_dict()
    del batches
    first.close()
    with pytest.raises(ArgumentValueError, match=r"stream\.weights=\[1\.0, 1\.0\]"):
        loader(FLIP).load_state_dict(state)
    resumed = loader(FLIP)  # from drawn 100 on: B only, until 200
    resumed.load_state_dict(state, reweight=True)
    tail = loader_ids(resumed)
    assert sorted(head + tail) == list(range(300)) + list(range(1000, 1300))
    assert all(i >= 1000 for i in tail[:100])


@pytest.mark.parametrize("workers", [0, 2])
def test_a_loader_state_taken_between_epochs_keeps_the_schedules_count(workers, no_leaks):
    def loader() -> DataLoader:
        return DataLoader(MixedStream([A, B], FLIP, seed=8), StreamSampler(batch_size=20), num_workers=workers)

    full = loader()
    expected = loader_ids(full), loader_ids(full)
    first = loader()
    assert loader_ids(first) == expected[0]
    state = json.loads(json.dumps(first.state_dict()))  # after epoch 0, before epoch 1
    assert state["epoch"] == 1 and state["source"]["stream"]["drawn"] == 600
    first.close()
    resumed = loader()  # a new process would build it so: its mix has drawn nothing
    resumed.load_state_dict(state)
    assert loader_ids(resumed) == expected[1]
