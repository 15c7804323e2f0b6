"""Tests for dataloader.pad_collator: the padding rules, lengths, dtypes, the allocator,
errors, a property test, and PadCollator in a real loader (serial and two worker processes)."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import (
    ArgumentTypeError,
    ArgumentValueError,
    Collator,
    CollateError,
    DataLoader,
    Dataset,
    PadCollator,
    SequentialSampler,
    StreamSampler,
)
from dataloader import _alloc
from tests.harness import assert_parallel_equals_serial

Pair = collections.namedtuple("Pair", "tokens label")


class Recorder:
    """An allocator that remembers every array it hands out (filled with 7s, so a cell the
    collator forgets to write shows)."""

    def __init__(self) -> None:
        self.made: list[np.ndarray] = []

    def __call__(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        out = np.full(shape, 7, dtype)
        self.made.append(out)
        return out


# ---------------------------------------------------------------- the rules


def test_dict_fields_are_padded_with_lengths_after_them():
    samples = [
        {"ids": np.array([1, 2, 3]), "label": 0, "name": "a"},
        {"ids": np.array([4]), "label": 1, "name": "b"},
    ]
    batch = PadCollator().apply(samples)
    assert list(batch) == ["ids", "ids_lengths", "label", "name"]
    np.testing.assert_array_equal(batch["ids"], [[1, 2, 3], [4, 0, 0]])
    assert batch["ids_lengths"].dtype == np.int64 and batch["ids_lengths"].tolist() == [3, 1]
    np.testing.assert_array_equal(batch["label"], Collator().apply([0, 1]))
    assert batch["name"] == ["a", "b"]


def test_pad_value_per_field_and_zero_for_the_others():
    samples = [
        {"input_ids": [5, 6, 7], "labels": [5, 6, 7], "mask": [1, 1, 1]},
        {"input_ids": [8], "labels": [8], "mask": [1]},
    ]
    batch = PadCollator({"input_ids": 2, "labels": -100}).apply(samples)
    assert batch["input_ids"][1].tolist() == [8, 2, 2]
    assert batch["labels"][1].tolist() == [8, -100, -100]
    assert batch["mask"][1].tolist() == [1, 0, 0]


@pytest.mark.parametrize("multiple_of, longest, expected", [(1, 5, 5), (8, 5, 8), (8, 8, 8), (8, 9, 16), (4, 0, 0)])
def test_multiple_of_rounds_the_padded_length_up(multiple_of, longest, expected):
    samples = [np.ones(longest, np.float32), np.ones(min(longest, 2), np.float32)]
    batch = PadCollator(multiple_of=multiple_of).apply(samples)
    assert batch.shape == (2, expected) and batch.dtype == np.float32
    assert batch[0, longest:].sum() == 0 and batch[0, :longest].sum() == longest


def test_tuples_namedtuples_and_lists_keep_their_structure_without_lengths():
    tuples = PadCollator(-1).apply([(np.array([1, 2]), 7), (np.array([3]), 8)])
    assert isinstance(tuples, tuple) and len(tuples) == 2
    assert tuples[0].tolist() == [[1, 2], [3, -1]] and tuples[1].tolist() == [7, 8]
    pairs = PadCollator(fields=[0]).apply([Pair([1], 1), Pair([2, 3], 2)])
    assert type(pairs) is Pair and pairs.tokens.tolist() == [[1, 0], [2, 3]] and pairs.label.tolist() == [1, 2]
    lists = PadCollator().apply([[np.zeros(1), "x"], [np.zeros(3), "y"]])
    assert isinstance(lists, list) and lists[0].shape == (2, 3) and lists[1] == ["x", "y"]


def test_bare_arrays_and_lists_of_numbers_give_a_padded_array():
    assert PadCollator(9).apply([np.array([1]), np.array([2, 3])]).tolist() == [[1, 9], [2, 3]]
    assert PadCollator().apply([[1, 2, 3], [4]]).tolist() == [[1, 2, 3], [4, 0, 0]]
    assert PadCollator().apply([[True], [False, True]]).dtype == bool


def test_arrow_arrays_and_other_array_likes_are_padded():
    pa = pytest.importorskip("pyarrow")
    batch = PadCollator().apply([{"x": pa.array([1, 2], pa.int16())}, {"x": pa.array([3], pa.int16())}])
    assert batch["x"].dtype == np.int16 and batch["x"].tolist() == [[1, 2], [3, 0]]


def test_only_the_first_axis_is_padded():
    samples = [np.ones((2, 4), np.float32), np.ones((5, 4), np.float32)]
    batch = PadCollator(-1.0).apply(samples)
    assert batch.shape == (2, 5, 4)
    assert (batch[0, 2:] == -1).all() and (batch[0, :2] == 1).all() and (batch[1] == 1).all()


def test_fields_limits_padding_and_other_fields_collate_as_the_default_does():
    samples = [{"ids": [1, 2], "image": np.zeros((2, 2)), "pos": [0, 1]},
               {"ids": [3], "image": np.ones((2, 2)), "pos": [5, 6]}]
    batch = PadCollator(fields=["ids"]).apply(samples)
    assert list(batch) == ["ids", "ids_lengths", "image", "pos"]
    expected = Collator().apply([{k: s[k] for k in ("image", "pos")} for s in samples])
    np.testing.assert_array_equal(batch["image"], expected["image"])
    assert [c.tolist() for c in batch["pos"]] == [c.tolist() for c in expected["pos"]]  # positions, as the default


def test_a_ragged_field_left_out_of_fields_gets_the_default_error():
    samples = [{"ids": [1], "boxes": np.zeros((1, 4))}, {"ids": [2, 3], "boxes": np.zeros((3, 4))}]
    with pytest.raises(CollateError, match=r"`sample\['boxes'\]`: arrays have different shapes.*PadCollator"):
        PadCollator(fields=["ids"]).apply(samples)


def test_numbers_0d_arrays_and_strings_are_not_padded():
    samples = [{"n": np.array(1.5), "s": "a", "x": [1]}, {"n": np.array(2.5), "s": "b", "x": [2, 3]}]
    batch = PadCollator().apply(samples)
    assert list(batch) == ["n", "s", "x", "x_lengths"] and batch["n"].tolist() == [1.5, 2.5]
    np.testing.assert_array_equal(PadCollator().apply([1, 2]), [1, 2])


def test_equal_lengths_give_the_default_batch():
    samples = [{"x": np.arange(4) + i, "y": float(i)} for i in range(3)]
    batch, default = PadCollator(multiple_of=1).apply(samples), Collator().apply(samples)
    np.testing.assert_array_equal(batch["x"], default["x"])
    assert batch["x"].dtype == default["x"].dtype and batch["x_lengths"].tolist() == [4, 4, 4]


# ---------------------------------------------------------------- dtypes and the allocator


@pytest.mark.parametrize("values, dtype", [
    ([np.array([1], np.int8), np.array([2, 3], np.int32)], np.int32),
    ([[1, 2], [0.5]], np.float64),
    ([[], np.array([1, 2], np.uint8)], np.uint8),  # an empty list takes the others' dtype
    ([[], []], np.int64),  # empty lists alone: the int pad's int64 (was NumPy's float64 for [])
    ([[], np.zeros(0, np.int8)], np.int8),  # an empty array has a dtype
    ([np.array([2**63], np.uint64), np.array([-1, 0], np.int64)], None),  # neither int64 nor uint64
    ([np.array([2**62], np.uint64), np.array([-1, 0], np.int64)], np.int64),  # kept exact, not float64
    ([np.array([2**62, 1], np.uint64), np.array([-1, 0], np.int64)], np.int64),  # equal lengths: one concatenate
])
def test_dtypes_follow_the_default_collators_promotion(values, dtype):
    if dtype is None:
        with pytest.raises(CollateError, match="needs uint64, which cannot hold the negative -1"):
            PadCollator().apply(values)
        return
    batch = PadCollator().apply(values)
    assert batch.dtype == dtype
    for row, value in zip(batch, values):
        assert row[: len(value)].tolist() == list(np.asarray(value).tolist())


def test_outputs_come_from_the_allocator_one_array_per_field():
    record = Recorder()
    samples = [{"ids": np.arange(n, dtype=np.int32), "y": n} for n in (3, 1, 0, 2)]
    with _alloc.use_allocator(record):
        batch = PadCollator(-1, multiple_of=4).apply(samples)
    ids, lengths = batch["ids"], batch["ids_lengths"]
    assert any(made is ids for made in record.made) and any(made is lengths for made in record.made)
    assert sum(made.size for made in record.made) == ids.size + lengths.size + len(samples)  # + the y column
    assert ids.tolist() == [[0, 1, 2, -1], [0, -1, -1, -1], [-1, -1, -1, -1], [0, 1, -1, -1]]


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("pad, dtype, shown", [
    (-1, np.uint8, "(it holds 0 to 255)"), (0.5, np.int32, "int32"), (300, np.int8, "(it holds -128 to 127)"),
    (1e40, np.float32, "float32"), (2, bool, "bool"), (2**24 + 1, np.float32, "float32"), (1j, np.float64, "float64"),
])
def test_a_pad_value_that_does_not_fit_names_the_field(pad, dtype, shown):
    samples = [{"x": np.zeros(1, dtype)}, {"x": np.zeros(2, dtype)}]
    with pytest.raises(CollateError, match=r"Cannot pad `sample\['x'\]`: pad_value .* does not fit its dtype") as info:
        PadCollator({"x": pad}).apply(samples)
    assert shown in str(info.value)


@pytest.mark.parametrize("pad, dtype", [(-100, np.int64), (255, np.uint8), (float("nan"), np.float16),
                                        (-1.0, np.int16), (True, np.uint8), (1, bool), (0.5 + 1j, np.complex64)])
def test_pad_values_that_fit(pad, dtype):
    batch = PadCollator(pad).apply([np.zeros(1, dtype), np.zeros(2, dtype)])
    np.testing.assert_array_equal(batch[0, 1], np.array(pad).astype(dtype))


@pytest.mark.parametrize("kwargs, error, message", [
    ({"pad_value": "x"}, ArgumentTypeError, "`pad_value` must be a number or a dict of numbers per field; got 'x'"),
    ({"pad_value": {"a": None}}, ArgumentTypeError, "got None"),
    ({"pad_value": 2**64}, ArgumentValueError, "no array dtype holds"),
    ({"multiple_of": 0}, ArgumentValueError, "`multiple_of` must be a positive integer; got 0"),
    ({"multiple_of": 2.0}, ArgumentTypeError, "`multiple_of` must be a positive integer"),
    ({"fields": "ids"}, ArgumentTypeError, r"Write fields=\['ids'\]"),
    ({"fields": []}, ArgumentValueError, "must name at least one field"),
    ({"fields": ["a"], "pad_value": {"b": 1}}, ArgumentValueError, r"gives values for \['b'\], which `fields` \['a'\]"),
])
def test_bad_arguments_are_refused_at_construction(kwargs, error, message):
    with pytest.raises(error, match=message):
        PadCollator(**kwargs)


def test_a_named_field_that_is_not_an_array_names_field_and_sample():
    samples = [{"ids": [1]}, {"ids": [2]}, {"ids": 3}]
    with pytest.raises(CollateError, match=r"Cannot pad `sample\['ids'\]`: sample 2 has int there"):
        PadCollator(fields=["ids"]).apply(samples)
    with pytest.raises(CollateError, match=r"`sample\[0\]`: sample 1 has a list \(not of numbers\) there"):
        PadCollator().apply([([1], 0), (["a"], 1)])
    with pytest.raises(CollateError, match=r"sample 0 has a 0-d array there"):
        PadCollator(fields=["ids"]).apply([{"ids": np.array(1)}])


def test_axes_past_the_first_must_agree():
    samples = [{"b": np.zeros((1, 4))}, {"b": np.zeros((2, 4))}, {"b": np.zeros((2, 5))}]
    with pytest.raises(CollateError, match=r"`sample\['b'\]`: arrays differ past the first axis.*"
                                           r"shape \(1, 4\) in sample 0, \(2, 5\) in sample 2"):
        PadCollator().apply(samples)


def test_names_the_samples_do_not_have_are_errors():
    with pytest.raises(CollateError, match=r"`fields` names \['idz'\], but the samples' keys are \['ids'\]"):
        PadCollator(fields=["idz"]).apply([{"ids": [1]}])
    with pytest.raises(CollateError, match=r"`pad_value` names \['label'\], but the padded fields are \['ids'\]"):
        PadCollator({"label": -1}).apply([{"ids": [1], "label": 0}])
    with pytest.raises(CollateError, match=r"`fields` names \[2\], but the samples have the positions \[0, 1\]"):
        PadCollator(fields=[2]).apply([([1], 0)])
    with pytest.raises(CollateError, match="the samples are arrays or numbers, which have no fields"):
        PadCollator(fields=[0]).apply([np.zeros(2)])


def test_structure_errors_match_the_default_collators():
    with pytest.raises(CollateError, match=r"sample 0 has keys \['a'\] but sample 1 has keys \['b'\]"):
        PadCollator().apply([{"a": [1]}, {"b": [1]}])
    with pytest.raises(CollateError, match="length 2 in sample 0, length 1 in sample 1"):
        PadCollator().apply([([1], 0), ([1],)])
    with pytest.raises(CollateError, match="type tuple in sample 0 but Pair in sample 1"):
        PadCollator().apply([([1], 0), Pair([1], 0)])
    with pytest.raises(CollateError, match="needs at least one sample"):
        PadCollator().apply([])
    with pytest.raises(CollateError, match="already, where PadCollator puts the padded field's lengths"):
        PadCollator().apply([{"x": [1], "x_lengths": 1}])


def test_the_default_collators_ragged_error_points_at_pad_collator():
    with pytest.raises(CollateError, match=r"`sample\['ids'\]`: arrays have different shapes: \(2,\) in sample 0; "
                                           r"\(3,\) in sample 1\. To pad them to the longest, pass "
                                           r"collator=PadCollator\(\) \(dataloader\.PadCollator\)"):
        Collator().apply([{"ids": np.zeros(2)}, {"ids": np.zeros(3)}])
    with pytest.raises(CollateError, match=r"\(2, 2\) in sample 0; \(3, 3\) in sample 1\. They differ in more than "
                                           r"the first axis \(which PadCollator pads\)"):
        Collator().apply([np.zeros((2, 2)), np.zeros((3, 3))])


def test_repr_shows_the_options():
    assert repr(PadCollator({"a": -100}, multiple_of=8, fields=("a",))) == (
        "PadCollator(pad_value={'a': -100}, multiple_of=8, fields=['a'])"
    )


# ---------------------------------------------------------------- property


_DTYPES = [np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64, np.bool_]


@st.composite
def _pad_for(draw: Any, dtype: np.dtype) -> Any:
    if dtype.kind == "b":
        return draw(st.booleans())
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return draw(st.integers(int(info.min), int(info.max)))
    return draw(st.floats(-1000, 1000, width=16))  # exact in every float dtype drawn


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_property_values_in_place_padding_lengths_and_size(data):
    dtype = np.dtype(data.draw(st.sampled_from(_DTYPES)))
    trailing = data.draw(st.sampled_from([(), (2,), (1, 3)]))
    lengths = data.draw(st.lists(st.integers(0, 9), min_size=1, max_size=6))
    multiple_of = data.draw(st.integers(1, 5))
    pad = data.draw(_pad_for(dtype))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    arrays = [rng.integers(0, 100, (n, *trailing)).astype(dtype) for n in lengths]
    as_lists = not trailing and dtype.kind in "iu" and data.draw(st.booleans())  # a Parquet list column's form
    values = [a.tolist() for a in arrays] if as_lists else arrays
    if as_lists:
        dtype = np.dtype(np.int64)  # Python ints: the default collator's int64
    samples = [{"x": v, "i": i} for i, v in enumerate(values)]

    batch = PadCollator({"x": pad}, multiple_of=multiple_of).apply(samples)

    out, counts = batch["x"], batch["x_lengths"]
    size = out.shape[1]
    assert size % multiple_of == 0 and max(lengths) <= size < max(lengths) + multiple_of
    assert out.shape == (len(lengths), size, *trailing) and out.dtype == dtype
    assert counts.dtype == np.int64 and counts.tolist() == lengths
    for row, array in zip(out, arrays):
        np.testing.assert_array_equal(row[: len(array)], array)  # every value in place
        assert (row[len(array):] == np.array(pad).astype(dtype)).all()  # the rest is padding
    assert batch["i"].tolist() == list(range(len(lengths)))


# ---------------------------------------------------------------- in a loader


class Tokens(Dataset):
    """Dict samples of variable length, the way a tokenized text dataset gives them."""

    def __len__(self) -> int:
        return 22

    def __getitem__(self, index: int) -> dict:
        length = (index * 7) % 11
        return {"input_ids": np.arange(length, dtype=np.int32) + index, "labels": list(range(length)), "id": index}


def _token_loader(num_workers: int, **kwargs: Any) -> DataLoader:
    dataset = Tokens()
    return DataLoader(
        dataset, SequentialSampler(dataset, batch_size=4),
        collator=PadCollator({"input_ids": 0, "labels": -100}, multiple_of=8),
        num_workers=num_workers, **kwargs,
    )


def test_in_a_loader_with_two_workers_equals_serial(no_leaks):
    serial = assert_parallel_equals_serial(_token_loader, worker_counts=(2,))
    dataset = Tokens()
    assert len(serial) == 6
    for start, batch in zip(range(0, 22, 4), serial):
        rows = [dataset[i] for i in range(start, min(start + 4, 22))]
        longest = max(len(r["labels"]) for r in rows)
        assert batch["input_ids"].shape == (len(rows), -(-longest // 8) * 8)
        assert batch["labels_lengths"].tolist() == [len(r["labels"]) for r in rows]
        for row, sample in zip(batch["labels"], rows):
            n = len(sample["labels"])
            assert row[:n].tolist() == sample["labels"] and (row[n:] == -100).all()


def test_parquet_list_columns_are_padded_in_a_loader(no_leaks, tmp_path):
    from dataloader.columnar import ParquetStream, write_parquet_shards

    tokens = [list(range(i % 5)) for i in range(20)]
    write_parquet_shards({"tokens": tokens, "label": list(range(20))}, tmp_path, rows_per_shard=10)

    def make(num_workers: int, **kwargs: Any) -> DataLoader:
        return DataLoader(ParquetStream(tmp_path), StreamSampler(batch_size=5), collator=PadCollator(-1),
                          num_workers=num_workers, **kwargs)

    serial = assert_parallel_equals_serial(make, worker_counts=(2,))
    rows = {int(label): (list(row[:n]), n) for b in serial
            for row, n, label in zip(b["tokens"], b["tokens_lengths"], b["label"])}
    assert rows == {i: (tokens[i], len(tokens[i])) for i in range(20)}
    assert all(b["tokens"].dtype == np.int64 and b["tokens"].shape[1] == max(b["tokens_lengths"]) for b in serial)


def test_a_padded_batch_made_in_a_worker_arena_is_not_copied_again():
    from dataloader._transport.arena import BumpAllocator
    from dataloader._transport.codec import pack, split
    from tests._transport._helpers import LocalWorker

    samples = [{"ids": np.arange(n, dtype=np.int32), "label": n} for n in (5, 300, 17, 64)]
    worker = LocalWorker(8 * 2**20)
    try:
        allocator = BumpAllocator(worker.pool.acquire(256 * 1024))
        with _alloc.use_allocator(allocator):
            batch = PadCollator(multiple_of=64).apply(samples)
        meta, raws = split(batch)
        placed = [allocator.segment.offset_of(raw) for raw in raws]
        assert len(raws) == 3 and None not in placed, "the collator wrote outside the arena"
        payload = pack(meta, raws, worker.pool, allocator)
        assert [offset for offset, _ in payload.layout] == placed, "pack copied what was already in place"
    finally:
        worker.close()
