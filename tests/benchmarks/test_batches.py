"""benchmarks.batches: the arrays of a nested batch, and the plain loop's batches."""

import numpy as np

from dataloader import ArrayDataset, Collator, DataLoader, RandomSampler
from benchmarks.batches import leaves, plain_batches, stack, touch
from benchmarks.small import RecordDataset, ScalarsDataset, VectorDataset


def test_leaves_walks_dicts_lists_and_tuples_depth_first():
    a, b, c = np.zeros(2), np.ones(3), np.arange(4)
    assert [x is y for x, y in zip(leaves({"x": (a, [b]), "y": c}), (a, b, c))] == [True] * 3
    assert leaves(a)[0] is a and leaves(()) == []


def test_touch_sums_the_first_values_of_every_array():
    assert touch((np.arange(20), {"y": np.ones((2, 2))})) == sum(range(16)) + 4


def test_plain_batches_stack_arrays_and_numbers():
    dataset = ArrayDataset(np.arange(10).reshape(5, 2), [7, 8, 9, 10, 11])
    batches = list(plain_batches(dataset, [4, 0, 2], 2))
    assert [b[1].tolist() for b in batches] == [[11, 7], [9]]
    assert batches[0][0].tolist() == [[8, 9], [0, 1]]
    forever = plain_batches(dataset, [1], 1, forever=True)
    assert [next(forever)[1].tolist() for _ in range(3)] == [[8]] * 3
    assert stack([(np.zeros(2), 1)])[1].dtype.kind == "i"


def test_plain_batches_from_an_index_array_are_our_loaders_batches():
    dataset = ArrayDataset(np.arange(11) * 10, np.arange(11) % 3)
    sampler = RandomSampler(dataset, batch_size=4, seed=5)
    order = np.random.default_rng([5, 0]).permutation(11)  # what the sampler draws for epoch 0
    ours = list(DataLoader(dataset, sampler))
    plain = list(plain_batches(dataset, order, 4))
    assert len(plain) == len(ours) == 3
    for mine, theirs, expected in zip(ours, plain, plain_batches(dataset, order.tolist(), 4)):
        assert [leaf.tolist() for leaf in mine] == [leaf.tolist() for leaf in theirs]
        assert [leaf.tolist() for leaf in theirs] == [leaf.tolist() for leaf in expected]


def test_stack_takes_dicts_by_key_and_keeps_strings_in_a_list():
    batch = stack([{"id": 1, "score": 0.5, "tag": "a"}, {"id": 2, "score": 1.5, "tag": "b"}])
    assert list(batch) == ["id", "score", "tag"] and batch["tag"] == ["a", "b"]
    assert batch["id"].dtype == np.int64 and batch["score"].tolist() == [0.5, 1.5]


def test_a_text_field_is_one_leaf_and_touch_counts_its_strings():
    batch = {"id": np.arange(3), "tag": ["a", "b", "c"]}
    assert [type(leaf) for leaf in leaves(batch)] == [np.ndarray, list]
    assert touch(batch) == 0 + 1 + 2 + 3


def test_the_collator_floor_makes_the_plain_loops_batches_with_our_collator():
    order = np.random.default_rng(0).permutation(1000)
    for dataset in (ScalarsDataset(1000), RecordDataset(1000), VectorDataset(1000)):
        plain = list(plain_batches(dataset, order, 256))
        ours = list(plain_batches(dataset, order, 256, collate=Collator().apply))
        assert len(ours) == len(plain) == 4
        for mine, theirs in zip(ours, plain):
            assert type(mine) is type(theirs)
            for a, b in zip(leaves(mine), leaves(theirs)):
                assert np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(a, b)

