"""Worker stream shards read in order (``parallel_stream=True``, ``in_order=True``): the workers
take tasks in a fixed rotation, so their batches interleave alike in every run, whatever the
timing, and a resumed run goes on exactly where the saved one was."""

from __future__ import annotations

import collections
import json
import time
from typing import Iterator

import pytest

from dataloader import DataLoader, StreamDataset, StreamSampler, get_worker_info
from tests.harness import collect

BATCH_SIZE = 2
# Worker k reads range(100 * k, 100 * k + LENGTHS[k]): unequal shards, so some end early.
TWO = (10, 5)
THREE = (10, 5, 7)
EMPTY_MIDDLE = (5, 0, 7)  # worker 1 ends at its very first task


class OwnRanges(StreamDataset):
    """Worker ``k`` yields ``100 * k + i`` for ``i < lengths[k]``; worker ``slow`` sleeps per sample."""

    def __init__(self, lengths: tuple[int, ...], slow: int = -1, delay: float = 0.01) -> None:
        self.lengths = lengths
        self.slow = slow
        self.delay = delay

    def __iter__(self) -> Iterator[int]:
        info = get_worker_info()
        worker = 0 if info is None else info.id
        for i in range(self.lengths[worker]):
            if worker == self.slow:
                time.sleep(self.delay)
            yield 100 * worker + i


def _loader(lengths: tuple[int, ...], slow: int = -1, **options) -> DataLoader:
    options.setdefault("multiprocessing_context", "fork")
    return DataLoader(OwnRanges(lengths, slow), StreamSampler(batch_size=BATCH_SIZE),
                      num_workers=len(lengths), parallel_stream=True, **options)


def _values(batch) -> tuple[int, ...]:
    return tuple(int(v) for v in batch)


def _run(loader: DataLoader) -> list[tuple[int, ...]]:
    try:
        return [_values(batch) for batch in collect(loader)]
    finally:
        loader.close()


def _rotation(lengths: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Round robin over the workers' batches, each worker dropping out after its last one."""
    shards = [[tuple(range(100 * k + i, 100 * k + min(i + BATCH_SIZE, n))) for i in range(0, n, BATCH_SIZE)]
              for k, n in enumerate(lengths)]
    rounds = max(len(shard) for shard in shards)
    return [shard[r] for r in range(rounds) for shard in shards if r < len(shard)]


def test_the_rotation_computed_by_hand():
    assert _rotation(TWO) == [(0, 1), (100, 101), (2, 3), (102, 103), (4, 5), (104,), (6, 7), (8, 9)]


@pytest.mark.parametrize("lengths", [TWO, THREE, EMPTY_MIDDLE], ids=["2-workers", "3-workers", "empty-shard"])
@pytest.mark.parametrize("slow", [-1, 0, 1], ids=["even", "worker-0-slow", "worker-1-slow"])
def test_batches_come_in_rotation_whatever_the_timing(no_leaks, lengths, slow):
    expected = _rotation(lengths)
    for _ in range(3):
        assert _run(_loader(lengths, slow)) == expected


def test_the_rotation_is_the_same_with_every_start_method(no_leaks, start_method):
    assert _run(_loader(THREE, slow=0, multiprocessing_context=start_method)) == _rotation(THREE)


@pytest.mark.parametrize("options", [dict(worker_type="thread"), dict(prefetch_factor=1), dict(prefetch_factor=5),
                                     dict(batches_per_message=4)], ids=str)
def test_the_rotation_holds_for_thread_workers_prefetch_and_grouping(no_leaks, options):
    assert _run(_loader(THREE, slow=0, **options)) == _rotation(THREE)


def _cut(lengths: tuple[int, ...], k: int, **options) -> tuple[list[tuple[int, ...]], dict]:
    """The first ``k`` batches of an epoch and the state taken right after them, in the loop."""
    loader = _loader(lengths, slow=0, **options)
    try:
        with iter(loader) as batches:
            head = [_values(next(batches)) for _ in range(k)]
            return head, json.loads(json.dumps(loader.state_dict()))
    finally:
        loader.close()


def _resumed(lengths: tuple[int, ...], state: dict, **options) -> list[tuple[int, ...]]:
    loader = _loader(lengths, slow=0, **options)
    loader.load_state_dict(state, skip_ahead=True)
    return _run(loader)


@pytest.mark.parametrize("lengths", [TWO, THREE], ids=["2-workers", "3-workers"])
def test_a_resume_at_every_cut_goes_on_in_rotation(no_leaks, lengths):
    """Every cut, resumed with each prefetch factor (the state does not depend on it)."""
    expected = _rotation(lengths)
    short_ended = max(i for i, batch in enumerate(expected) if batch[0] // 100 == 1) + 1
    cuts = range(len(expected) + 1)
    assert short_ended in cuts  # right after the short worker's last batch
    for k in cuts:
        head, state = _cut(lengths, k)
        made_by = [batch[0] // 100 for batch in head]
        assert state["last_worker"] == (made_by[-1] if head else -1)
        assert state["workers"] == {str(w): n for w, n in sorted(collections.Counter(made_by).items())}
        for prefetch_factor in (2, 1, 4):
            rest = _resumed(lengths, state, prefetch_factor=prefetch_factor)
            assert head + rest == expected, f"cut after {k} batches, resumed with prefetch_factor={prefetch_factor}"


@pytest.mark.parametrize("slow", [0, 1], ids=["worker-0-slow", "worker-1-slow"])
def test_out_of_order_delivers_every_batch_once(no_leaks, slow):
    batches = _run(_loader(THREE, slow, in_order=False))
    assert sorted(batches) == sorted(_rotation(THREE))
