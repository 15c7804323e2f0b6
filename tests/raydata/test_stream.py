"""RayStream over a local Ray (one instance per session: see conftest.py)."""

from __future__ import annotations

import multiprocessing
import pickle
import queue
import time

import numpy as np
import pytest

pytest.importorskip("ray", reason="Ray Data is not installed: pip install 'dataloader[ray]'")

from dataloader import (  # noqa: E402
    ArgumentTypeError, ArgumentValueError, DataLoader, DataLoaderError, LoaderTimeoutError, RayDataError,
    RayStream, StreamSampler,
)
from dataloader.transform import Transform  # noqa: E402
from tests.raydata._ranks import read_rank  # noqa: E402

ROWS = 100


@pytest.fixture
def dataset(ray_local):
    """``ROWS`` rows, ``id`` and ``x = 2 * id``, made by a Ray task."""
    return ray_local.data.range(ROWS).map_batches(lambda b: {"id": b["id"], "x": b["id"] * 2.0})


class PlusOne(Transform):
    def apply(self, row):
        return {"id": row["id"], "x": row["x"] + 1}


def ids(batches) -> list[int]:
    return sorted(i for batch in batches for i in batch["id"].tolist())


def test_whole_dataset_in_batches_with_preload_three_epochs(dataset, no_leaks_beside_ray):
    stream = RayStream(dataset, batch_size=16)
    loader = DataLoader(stream, StreamSampler(), preload=True)
    for epoch in range(3):
        batches = list(loader)
        assert [len(b["id"]) for b in batches] == [16] * 6 + [4]
        assert ids(batches) == list(range(ROWS))
        np.testing.assert_array_equal(batches[0]["x"], batches[0]["id"] * 2.0)
        stats = stream.stats()
        assert (stats.epoch, stats.batches, stats.rows) == (epoch, 7, ROWS)
        assert stats.wait_seconds > 0
        read = loader.stats().stages["read"]  # the wait on the cluster, in the stage table
        assert read.count == 7 and 0 < read.total


def test_rows_with_a_transform_in_two_workers(dataset, no_leaks_beside_ray):
    loader = DataLoader(RayStream(dataset, read_batch_size=32), StreamSampler(batch_size=10),
                        transform=PlusOne(), num_workers=2)
    batches = list(loader)
    assert len(batches) == 10 and ids(batches) == list(range(ROWS))
    for batch in batches:
        np.testing.assert_array_equal(batch["x"], batch["id"] * 2.0 + 1)


def test_two_ranks_read_disjoint_equal_shards_for_three_epochs(ray_local, no_leaks_beside_ray):
    splits = ray_local.data.range(ROWS).streaming_split(2, equal=True)
    address = ray_local.get_runtime_context().gcs_address
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    ranks = [context.Process(target=read_rank, args=(address, pickle.dumps(split), 3, results))
             for split in splits]
    for rank in ranks:
        rank.start()
    try:
        seen = [results.get(timeout=90) for _ in ranks]
    finally:
        for rank in ranks:
            rank.join(30)
            if rank.is_alive():
                rank.kill()
    assert all(isinstance(s, list) for s in seen), seen
    for epoch in range(3):
        (count_0, rows_0), (count_1, rows_1) = seen[0][epoch], seen[1][epoch]
        assert count_0 == count_1  # equal=True: no rank waits for a batch the other never sends
        assert not set(rows_0) & set(rows_1)
        assert sorted(rows_0 + rows_1) == list(range(ROWS))


def test_a_failing_ray_task_is_our_error_with_rays_cause(ray_local, no_leaks_beside_ray):
    def broken(batch):
        raise ValueError("this decode step is broken")

    broken_dataset = ray_local.data.range(10).map_batches(broken)
    loader = DataLoader(RayStream(broken_dataset, batch_size=4), StreamSampler())
    with pytest.raises(RayDataError, match="this decode step is broken") as caught:
        list(loader)
    assert isinstance(caught.value.__cause__, ray_local.exceptions.RayError)
    assert "epoch 0, after 0 batches" in str(caught.value)


def test_a_stalled_cluster_is_a_loader_timeout(ray_local, no_leaks_beside_ray):
    def stalled(batch):
        time.sleep(2)
        return batch

    loader = DataLoader(RayStream(ray_local.data.range(4).map_batches(stalled), batch_size=4),
                        StreamSampler(), timeout=0.5)
    iterator = iter(loader)
    with pytest.raises(LoaderTimeoutError):
        next(iterator)
    iterator.close()


def test_rays_own_wait_is_bounded_without_a_loader_timeout(ray_local, no_leaks_beside_ray):
    # Ray's iterator blocks (it does not raise) when its cluster goes away: RayStream bounds the
    # wait itself, so a loader with no timeout of its own still gets an error, not a hang.
    def stalled(batch):
        time.sleep(2)
        return batch

    stream = RayStream(ray_local.data.range(4).map_batches(stalled), batch_size=4, timeout=0.5)
    iterator = iter(DataLoader(stream, StreamSampler()))
    started = time.monotonic()
    with pytest.raises(RayDataError, match=r"no batch within 0.5 s \(RayStream's timeout\)"):
        next(iterator)
    assert time.monotonic() - started < 1.5
    iterator.close()


def test_closing_the_loader_mid_epoch_releases_rays_iterator(dataset, no_leaks_beside_ray):
    import threading

    loader = DataLoader(RayStream(dataset, batch_size=8), StreamSampler(), preload=True)
    iterator = iter(loader)
    next(iterator)
    iterator.close()
    deadline = time.monotonic() + 10
    while any(t.name.startswith("StreamingExecutor") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "Ray's executor outlived the closed epoch"
        time.sleep(0.05)
    assert ids(loader) == list(range(ROWS))  # the next epoch starts afresh


def test_set_epoch_reseeds_rays_local_shuffle(dataset):
    def order(epoch: int, seed: int = 7) -> list[int]:
        stream = RayStream(dataset, batch_size=25, local_shuffle_buffer_size=50, seed=seed)
        stream.set_epoch(epoch)
        return [i for batch in stream for i in batch.batch["id"].tolist()]

    assert order(1) == order(1)
    assert order(1) != order(2)
    assert sorted(order(2)) == list(range(ROWS))


def test_parallel_stream_is_refused(dataset):
    with pytest.raises(ArgumentValueError, match="read by the main process only"):
        DataLoader(RayStream(dataset), StreamSampler(batch_size=4), num_workers=2, parallel_stream=True)


def test_a_copy_in_another_process_refuses_to_read(dataset):
    copy = pickle.loads(pickle.dumps(RayStream(dataset)))
    with pytest.raises(DataLoaderError, match="read by the main process only"):
        iter(copy)


def test_resuming_mid_epoch_is_refused_and_at_an_epochs_end_allowed(dataset):
    loader = DataLoader(RayStream(dataset), StreamSampler(batch_size=4))
    with iter(loader) as it:
        next(it)
        mid_epoch = loader.state_dict()
        rest = sum(1 for _ in it)
    after_epoch = loader.state_dict()
    fresh = DataLoader(RayStream(dataset), StreamSampler(batch_size=4))
    with pytest.raises(ArgumentValueError, match="cannot resume in the middle of an epoch"):
        fresh.load_state_dict(mid_epoch, skip_ahead=True)
    fresh.load_state_dict(after_epoch)
    assert fresh.epoch == 1 and rest > 0
    assert sum(1 for _ in fresh) == rest + 1  # the next epoch, whole


def test_the_source_must_be_a_ray_dataset_or_iterator(ray_local):
    with pytest.raises(ArgumentTypeError, match="ray.data.Dataset or a ray.data.DataIterator"):
        RayStream([1, 2, 3])
    with pytest.raises(ArgumentValueError, match="batch_size"):
        RayStream(ray_local.data.range(3), batch_size=0)
