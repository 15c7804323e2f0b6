from time import perf_counter

import numpy as np
import pytest

from dataloader import Collator
from dataloader._stages.batch import BatchMaker, fetch
from dataloader._stages.task import BatchTask
from dataloader.transform import PseudoTransform, Transform


class Rows:
    def __init__(self):
        self.calls = []

    def __len__(self):
        return 10

    def __getitem__(self, index):
        return np.full(2, index)


class Batched(Rows):
    def __getitems__(self, indices):
        self.calls.append(list(indices))
        return [np.full(2, i) for i in indices]


def test_fetch_reads_each_index():
    assert [s.tolist() for s in fetch(Rows(), [3, 1])] == [[3, 3], [1, 1]]


def test_fetch_prefers_getitems():
    dataset = Batched()
    fetch(dataset, [4, 5])
    assert dataset.calls == [[4, 5]]


def test_batch_maker_runs_fetch_transform_collate():
    class Neg(Transform):
        def apply(self, input):
            return -input

    maker = BatchMaker(Rows(), Neg(), Collator())
    batch = maker(BatchTask(0, 0, indices=[1, 2]))
    assert batch.tolist() == [[-1, -1], [-2, -2]]


def test_batch_maker_uses_raw_samples_when_given():
    maker = BatchMaker(None, PseudoTransform(), Collator())
    assert maker(BatchTask(0, 0, samples=[np.int64(1), np.int64(2)])).tolist() == [1, 2]


def test_batch_maker_names_the_failing_stage():
    class Boom(Transform):
        def apply(self, input):
            raise RuntimeError("x")

    maker = BatchMaker(Rows(), Boom(), Collator())
    with pytest.raises(RuntimeError):
        maker(BatchTask(0, 0, indices=[1]))
    assert maker.stage == "transform"


def test_seeded_batches_depend_on_epoch_and_index_only():
    class Noise(Transform):
        def apply(self, input):
            return np.random.rand()

    maker = BatchMaker(Rows(), Noise(), Collator(), seed=3)
    a = maker(BatchTask(1, 4, indices=[0, 1]))
    maker(BatchTask(1, 5, indices=[0, 1]))
    assert np.array_equal(a, maker(BatchTask(1, 4, indices=[7, 8])))
    assert not np.array_equal(a, maker(BatchTask(2, 4, indices=[0, 1])))


def test_batch_rng_is_seeded_per_batch():
    from dataloader.rng import batch_rng

    class Draw(Transform):
        def apply(self, input):
            return batch_rng().integers(1 << 30)

    maker = BatchMaker(Rows(), Draw(), Collator(), seed=11)
    first = maker(BatchTask(0, 2, indices=[0, 1, 2]))
    assert len(set(first.tolist())) == 3  # one stream per batch, advancing per sample
    assert np.array_equal(first, maker(BatchTask(0, 2, indices=[5, 6, 7])))
    assert not np.array_equal(first, maker(BatchTask(0, 3, indices=[0, 1, 2])))


def test_a_batch_of_samples_read_elsewhere_counts_the_read_as_its_fetch():
    """A worker reading its own stream shard reads first, then has the maker make the batch."""
    maker = BatchMaker(None, PseudoTransform(), Collator())
    maker.mark_stage("fetch")
    assert maker.stage == "fetch"
    started = perf_counter()
    batch = maker.make_read(BatchTask(0, 3), [np.int64(1), np.int64(2)], started, 3)
    assert batch.tolist() == [1, 2]
    assert maker.timings.start == started <= maker.timings.fetched
    assert maker.timings.samples == 2
    maker.mark_stage("transport")
    assert maker.stage == "transport"


def test_a_batch_of_samples_read_elsewhere_is_seeded_by_its_place_in_the_shards_not_its_task():
    class Noise(Transform):
        def apply(self, input):
            return np.random.rand()

    maker = BatchMaker(None, Noise(), Collator(), seed=3)
    read = maker.make_read(BatchTask(1, 9), [0, 1], perf_counter(), 4)
    assert np.array_equal(read, maker(BatchTask(1, 4, samples=[5, 6])))
    assert not np.array_equal(read, maker(BatchTask(1, 9, samples=[5, 6])))
