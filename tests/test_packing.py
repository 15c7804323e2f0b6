"""PackedStream: the placements, every token once over real sources (Parquet, a map dataset, a
mix, a plain stream), the same rows for any worker count, exact resume (directly and through a
DataLoader, in worker processes and threads), parallel packing in workers, and its errors."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataloader import (
    ArgumentTypeError, ArgumentValueError, CollateError, DataLoader, MixedStream, PackedStream, PackStats,
    ParquetStream, StreamDataset, StreamSampler, WorkerError,
)
from dataloader.packing._fit import best_fit_decreasing, concat_cuts, first_fit, pieces
from tests.harness import as_worker

STEP = 1000  # token = sample number * STEP + position in the sample


def tokens(number: int, length: int) -> np.ndarray:
    return number * STEP + np.arange(length, dtype=np.int64)


class Samples(StreamDataset):
    """A plain stream (no state_dict) of samples of the given lengths: a bare array each, or a dict
    of ``ids``, ``pair`` (a trailing axis: the ids and their negatives) and a scalar ``label``."""

    def __init__(self, lengths: list[int], bare: bool = False, first: int = 0) -> None:
        self.lengths, self.bare, self.first = lengths, bare, first

    def __iter__(self):
        for number, length in enumerate(self.lengths, self.first):
            ids = tokens(number, length)
            yield ids if self.bare else {"ids": ids, "pair": np.stack([ids, -ids], axis=1), "label": number}


class Lengths:
    """A map dataset of ``{"ids": list of ints}`` (a Python list, as a Parquet list column gives)."""

    def __init__(self, lengths: list[int], first: int = 0) -> None:
        self.lengths, self.first = lengths, first

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> dict:
        return {"ids": tokens(index + self.first, self.lengths[index]).tolist()}


PAIR = ["ids", "pair"]  # the packed fields of a dict sample (its scalar label is left out)


def fields_of(bare: bool) -> tuple[str, ...]:
    return ("tokens",) if bare else ("ids", "pair")


def _runs(ids: np.ndarray) -> list[tuple[int, int, int]]:
    """(segment id, start, end) of each run of one id."""
    edges = [0, *(np.flatnonzero(np.diff(ids)) + 1).tolist(), len(ids)]
    return [(int(ids[a]), a, b) for a, b in zip(edges, edges[1:])]


def check_rows(rows, lengths, seq_len, too_long="split", shuffled=False, stats=None, fields=("ids", "pair"),
               pad=0, first=0) -> None:
    """Every token of every sample exactly once (as ``too_long`` leaves it), each piece in order,
    segment ids 1.. in a row and 0 on padding, positions 0.. in a piece, rows of seq_len, stats."""
    name = fields[0]
    found: dict[int, list[list[int]]] = {}
    padding = 0
    for row in rows:
        ids, positions, values = row[name + "_segment_ids"], row[name + "_positions"], np.asarray(row[name])
        assert set(row) == {f + s for f in fields for s in ("", "_segment_ids", "_positions")}
        assert ids.shape == positions.shape == (seq_len,) and ids.dtype == positions.dtype == np.int32
        assert values.shape[0] == seq_len
        for other in fields:
            assert np.array_equal(row[other + "_segment_ids"], ids) and np.array_equal(row[other + "_positions"], positions)
        if "pair" in fields:
            assert np.array_equal(row["pair"][:, 0], values) and np.array_equal(row["pair"][:, 1], np.where(ids > 0, -values, pad))
        assert (values[ids == 0] == pad).all() and (positions[ids == 0] == 0).all()
        padding += int((ids == 0).sum())
        pieces_ = [(s, a, b) for s, a, b in _runs(ids) if s]
        assert [s for s, _, _ in pieces_] == list(range(1, len(pieces_) + 1))
        for _, a, b in pieces_:
            assert np.array_equal(positions[a:b], np.arange(b - a))
            piece = values[a:b]
            sample = int(piece[0]) // STEP
            assert np.array_equal(piece // STEP, np.full(b - a, sample))
            found.setdefault(sample, []).append((piece % STEP).tolist())
    expected = {}
    for number, length in enumerate(lengths, first):
        keep = length if length <= seq_len or too_long == "split" else seq_len if too_long == "truncate" else 0
        if keep:
            expected[number] = list(range(keep))
    if shuffled:
        found = {s: sorted(p, key=lambda piece: piece[0]) for s, p in found.items()}
    assert {s: [t for p in ps for t in p] for s, ps in found.items()} == expected
    if stats is not None:
        long = [n for n in lengths if n > seq_len]
        assert stats.rows == len(rows) and stats.padding == padding and stats.samples == len(lengths)
        assert stats.tokens == sum(len(v) for v in expected.values()) == len(rows) * seq_len - padding
        assert stats.empty_samples == lengths.count(0)
        assert stats.split_samples == (len(long) if too_long == "split" else 0)
        assert stats.truncated_samples == (len(long) if too_long == "truncate" else 0)
        assert stats.truncated_tokens == (sum(n - seq_len for n in long) if too_long == "truncate" else 0)
        assert (stats.dropped_samples, stats.dropped_tokens) == ((len(long), sum(long)) if too_long == "drop" else (0, 0))


LENGTHS = np.random.default_rng(5).integers(0, 40, 120).tolist()  # seq_len 16: some split, some empty


# -- the placements, alone


def test_first_fit_takes_the_first_row_with_room():
    lengths = np.array([5, 3, 4, 2, 6], dtype=np.int64)
    row, offset, rows = first_fit(lengths, 8, np.zeros(5, dtype=bool))
    assert (row.tolist(), offset.tolist(), rows) == ([0, 0, 1, 1, 2], [0, 5, 0, 4, 0], 3)


def test_first_fit_gives_a_piece_that_continues_a_sample_a_new_row():
    lengths = np.array([3, 8, 2], dtype=np.int64)
    row, offset, rows = first_fit(lengths, 8, np.array([False, False, True]))
    assert (row.tolist(), offset.tolist(), rows) == ([0, 1, 2], [0, 0, 0], 3)


def test_best_fit_decreasing_takes_the_tightest_row():
    lengths = np.array([5, 3, 4, 2, 6], dtype=np.int64)
    row, offset, rows = best_fit_decreasing(lengths, 8)
    # longest first: 6 -> r0, 5 -> r1, 4 -> r2, 3 -> r1 (room 3), 2 -> r0 (room 2)
    assert (row.tolist(), offset.tolist(), rows) == ([1, 1, 2, 0, 0], [0, 5, 0, 6, 0], 3)


def test_pieces_cut_a_long_sample_in_order():
    start, length, follows = pieces(np.array([3, 17, 8], dtype=np.int64), 8)
    assert start.tolist() == [0, 3, 11, 19, 20] and length.tolist() == [3, 8, 8, 1, 8]
    assert follows.tolist() == [False, False, True, True, False]


def test_concat_cuts_full_rows_and_keeps_the_rest():
    placement, used = concat_cuts(np.array([5, 6, 7], dtype=np.int64), 8, final=False)
    assert used == 16 and placement.rows == 2
    assert placement.source.tolist() == [0, 5, 8, 11] and placement.length.tolist() == [5, 3, 3, 5]
    assert placement.row.tolist() == [0, 0, 1, 1] and placement.offset.tolist() == [0, 5, 0, 3]
    final, used = concat_cuts(np.array([5, 6, 7], dtype=np.int64), 8, final=True)
    assert used == 18 and final.rows == 3 and final.length.tolist() == [5, 3, 3, 5, 2]


# -- every token once, over every method and kind of source


@pytest.mark.parametrize("method", ["best_fit", "first_fit", "concat"])
@pytest.mark.parametrize("too_long", ["split", "truncate", "drop"])
def test_every_token_once_in_order(method, too_long):
    stream = PackedStream(Samples(LENGTHS), 16, method=method, buffer_size=3, too_long=too_long, fields=PAIR)
    check_rows(list(stream), LENGTHS, 16, too_long, stats=stream.stats())


def test_best_fit_pads_less_than_first_fit_and_concat_least():
    lengths = np.random.default_rng(1).lognormal(3, 1, 2000).astype(int).tolist()
    padding = {}
    for method in ("best_fit", "first_fit", "concat"):
        stream = PackedStream(Samples(lengths, bare=True), 128, method=method, buffer_size=16)
        for _ in stream:
            pass
        padding[method] = stream.stats().padding_fraction
    assert padding["concat"] < padding["best_fit"] < padding["first_fit"]


def test_a_shuffled_window_holds_the_same_rows():
    plain = [json.dumps({k: v.tolist() for k, v in r.items()}) for r in PackedStream(Samples(LENGTHS), 16, fields=PAIR)]
    shuffled = [json.dumps({k: v.tolist() for k, v in r.items()}) for r in PackedStream(Samples(LENGTHS), 16, seed=4, fields=PAIR)]
    assert plain != shuffled and sorted(plain) == sorted(shuffled)


def test_pad_value_per_field_and_fields_that_are_dropped():
    stream = PackedStream(Samples([3, 4]), 8, fields=["ids"], pad_value={"ids": -7})
    (row,) = list(stream)
    assert set(row) == {"ids", "ids_segment_ids", "ids_positions"}  # pair and label are left out
    assert row["ids"].tolist() == [1000, 1001, 1002, 1003, 0, 1, 2, -7]  # longest first
    assert row["ids_segment_ids"].tolist() == [1, 1, 1, 1, 2, 2, 2, 0]
    assert row["ids_positions"].tolist() == [0, 1, 2, 3, 0, 1, 2, 0]


@pytest.fixture(scope="module")
def parquet(tmp_path_factory):
    """A Parquet file of a list<int32> token column (lengths LENGTHS) and an id column."""
    path = tmp_path_factory.mktemp("packing") / "tokens.parquet"
    column = pa.array([tokens(n, k).tolist() for n, k in enumerate(LENGTHS)], type=pa.list_(pa.int32()))
    pq.write_table(pa.table({"ids": column, "id": np.arange(len(LENGTHS))}), path, row_group_size=25)
    return path


def test_a_parquet_list_column(parquet):
    stream = PackedStream(ParquetStream(parquet), 16, fields=["ids"], buffer_size=4)
    check_rows(list(stream), LENGTHS, 16, fields=("ids",), stats=stream.stats())


def test_a_map_dataset_read_in_order_shared_over_ranks_and_workers():
    found = []
    for rank in range(2):
        for worker in range(3):
            with as_worker(worker, 3):
                stream = PackedStream(Lengths(LENGTHS), 16, world_size=2, rank=rank, method="first_fit")
                found += list(stream)
    check_rows(found, LENGTHS, 16, fields=("ids",))


def test_a_mix_of_two_sources():
    mix = MixedStream([Samples(LENGTHS[:60]), Samples(LENGTHS[60:], first=60)], seed=2)
    stream = PackedStream(mix, 16, fields=["ids"], method="concat")
    check_rows(list(stream), LENGTHS, 16, fields=("ids",), stats=stream.stats())


def test_a_plain_stream_of_python_lists_and_a_bare_array():
    stream = PackedStream(Lengths(LENGTHS), 16, method="concat", too_long="truncate")
    check_rows(list(stream), LENGTHS, 16, "truncate", fields=("ids",), stats=stream.stats())
    bare = PackedStream(Samples(LENGTHS, bare=True), 16)
    check_rows(list(bare), LENGTHS, 16, fields=("tokens",), stats=bare.stats())


# -- through a DataLoader: the same rows for any worker count, and exact resume

LOADERS = [
    pytest.param({"num_workers": 0}, id="serial"),
    pytest.param({"num_workers": 1}, id="1 worker"),
    pytest.param({"num_workers": 2}, id="2 workers"),
    pytest.param({"num_workers": 2, "worker_type": "thread"}, id="2 threads"),
]


def packed_loader(parquet, **options) -> DataLoader:
    stream = PackedStream(ParquetStream(parquet, shuffle=True, seed=1), 16, fields=["ids"], buffer_size=3, seed=6)
    return DataLoader(stream, StreamSampler(batch_size=3), **options)


def batches(loader, epochs: int = 1) -> list:
    return [{k: v.tolist() for k, v in batch.items()} for _ in range(epochs) for batch in loader]


@pytest.mark.parametrize("options", LOADERS)
def test_a_loader_gives_the_same_rows_for_any_workers_and_resumes_exactly(no_leaks, parquet, options):
    whole = batches(packed_loader(parquet), epochs=2)
    assert batches(packed_loader(parquet, **options), epochs=2) == whole
    rows = [{k: np.array(v[i], np.int32 if k.endswith(("_ids", "_positions")) else None) for k, v in b.items()}
            for b in whole[: len(whole) // 2] for i in range(len(b["ids"]))]
    check_rows(rows, LENGTHS, 16, fields=("ids",), shuffled=True)
    for cut in (0, 5, len(whole) // 2 + 3):  # the first batch, mid-epoch, and in the second epoch
        first = packed_loader(parquet, **options)
        head: list = []
        for epoch in range(2 if cut else 0):
            first.set_epoch(epoch)
            for batch in first:
                head.append({k: v.tolist() for k, v in batch.items()})
                if len(head) == cut:
                    break
            if len(head) == cut:
                break
        if not cut:
            with iter(first):  # before the first batch
                state = first.state_dict()
        state = json.loads(json.dumps(first.state_dict()))
        resumed = packed_loader(parquet, **options)
        resumed.load_state_dict(state)
        rest = [{k: v.tolist() for k, v in b.items()} for _ in range(resumed.epoch, 2) for b in resumed]
        assert head + rest == whole, cut


def test_a_loader_refuses_a_state_of_another_packing(parquet):
    loader = packed_loader(parquet)
    with iter(loader) as rows:
        next(rows)
        state = loader.state_dict()
    for field, changed in [("seq_len", 32), ("method", "first_fit"), ("buffer_size", 4)]:
        options = {"seq_len": 16, "method": "best_fit", "buffer_size": 3, field: changed}
        seq_len = options.pop("seq_len")
        other = DataLoader(PackedStream(ParquetStream(parquet, shuffle=True, seed=1), seq_len, fields=["ids"], seed=6,
                                        **options), StreamSampler(batch_size=3))
        with pytest.raises(ArgumentValueError, match=rf"stream\.{field}="):
            other.load_state_dict(state)
        direct = PackedStream(ParquetStream(parquet, shuffle=True, seed=1), seq_len, fields=["ids"], seed=6, **options)
        with pytest.raises(ArgumentValueError, match=rf"packer with {field}=.*this packer has {field}="):
            direct.load_state_dict(state["source"]["stream"])


def _tokenize(row: dict) -> dict:
    """A stand-in tokenizer: a text's characters as int32 codes."""
    return {"ids": np.frombuffer(row["text"].encode(), dtype=np.uint8).astype(np.int32)}


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """Parquet files of texts: 90 texts, 3 files of 3 row groups."""
    folder = tmp_path_factory.mktemp("texts")
    rng = np.random.default_rng(3)
    text = ["".join(chr(97 + int(c)) for c in rng.integers(0, 26, int(n))) for n in rng.integers(0, 50, 90)]
    for number in range(3):
        pq.write_table(pa.table({"text": text[30 * number : 30 * number + 30]}), folder / f"{number}.parquet",
                       row_group_size=10)
    return folder, text


def _text_loader(folder, **options) -> DataLoader:
    stream = PackedStream(ParquetStream(folder, shuffle=True), 20, transform=_tokenize, method="concat", buffer_size=2)
    return DataLoader(stream, StreamSampler(batch_size=2), num_workers=2, parallel_stream=True,
                      multiprocessing_context="fork", **options)


def test_tokenizing_and_packing_in_each_worker_reads_every_text_once_and_resumes(texts):
    folder, text = texts
    whole = batches(_text_loader(folder))
    pieces_ = sorted(bytes(np.array(r)[np.array(s) == p + 1].astype(np.uint8)).decode()
                     for b in whole for r, s in zip(b["ids"], b["ids_segment_ids"]) for p in range(max(s)))
    chars = sorted("".join(text))
    assert sorted("".join(pieces_)) == chars  # every character once, across the two workers
    first = _text_loader(folder)
    with iter(first) as rows:
        head = [{k: v.tolist() for k, v in next(rows).items()} for _ in range(4)]
        state = first.state_dict()
    resumed = _text_loader(folder)
    resumed.load_state_dict(state, skip_ahead=True)
    assert head + batches(resumed) == whole


# -- state, epochs, pickling


def test_a_state_of_another_epoch_is_refused():
    stream = PackedStream(Samples(LENGTHS), 16, fields=PAIR)
    next(iter(stream))
    other = PackedStream(Samples(LENGTHS), 16, fields=PAIR)
    other.set_epoch(1)
    other.load_state_dict(stream.state_dict())
    with pytest.raises(ArgumentValueError, match="is a position in epoch 0, but this iter"):
        iter(other)


def test_it_pickles_mid_epoch_without_its_reader():
    stream = PackedStream(Samples(LENGTHS), 16, fields=PAIR, method="concat")
    rows = iter(stream)
    next(rows)
    assert stream.state_dict()["emitted"] == 1
    copy = pickle.loads(pickle.dumps(stream))
    assert copy.state_dict()["window"] == 0 and copy.state_dict()["emitted"] == 0
    assert isinstance(copy.stats(), PackStats) and copy.stats().rows == 0


def test_a_stream_that_refuses_to_resume_is_refused():
    class Refusing(Samples):
        resume_refused = "Refusing streams cannot go back."

    stream = PackedStream(Refusing(LENGTHS), 16, fields=PAIR, buffer_size=1)
    rows = iter(stream)
    for _ in range(6):
        next(rows)
    again = PackedStream(Refusing(LENGTHS), 16, fields=PAIR, buffer_size=1)
    again.load_state_dict(stream.state_dict())
    with pytest.raises(ArgumentValueError, match="cannot resume: Refusing streams"):
        next(iter(again))


# -- errors


@pytest.mark.parametrize("call,error,message", [
    (lambda: PackedStream(Samples([1]), 0), ArgumentValueError, "seq_len"),
    (lambda: PackedStream(Samples([1]), 8, method="fit"), ArgumentValueError, "`method` must be one of"),
    (lambda: PackedStream(Samples([1]), 8, too_long="cut"), ArgumentValueError, "`too_long` must be one of"),
    (lambda: PackedStream(Samples([1]), 8, buffer_size=0), ArgumentValueError, "buffer_size"),
    (lambda: PackedStream(Samples([1]), 8, fields="ids"), ArgumentTypeError, r"fields=\['ids'\]"),
    (lambda: PackedStream(Samples([1]), 8, fields=["ids", "ids"]), ArgumentValueError, "twice"),
    (lambda: PackedStream(Samples([1]), 8, fields=["ids"], pad_value={"x": 1}), ArgumentValueError, "not packed"),
    (lambda: PackedStream(Samples([1]), 8, pad_value="x"), ArgumentTypeError, "`pad_value` must be a number"),
    (lambda: PackedStream(iter([1]), 8), ArgumentTypeError, "is an iterator"),
    (lambda: PackedStream(Samples, 8), ArgumentTypeError, "the class Samples"),
    (lambda: PackedStream(Samples([1]), 8, transform=3), ArgumentTypeError, "`transform` must be"),
])
def test_bad_arguments_are_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_source_of_whole_batches_is_refused(parquet):
    with pytest.raises(ArgumentValueError, match="without batch_size"):
        PackedStream(ParquetStream(parquet, batch_size=4), 16)


@pytest.mark.parametrize("sample,message", [
    ({"ids": [1, 2, 3], "mask": [1, 1]}, r"differ in length: \{'ids': 3, 'mask': 2\}"),
    ({"ids": [1.5, 2.5]}, "float64, which does not cast to int64"),
    ({"ids": [[1, 2]]}, "has shape \\(1, 2\\)"),
    ({"other": [1]}, "has no field 'ids'"),
    ({"ids": list(range(20))}, "has 20 tokens, more than seq_len=16, and too_long='raise'"),
])
def test_bad_samples_are_collate_errors_naming_the_sample(sample, message):
    class Two(StreamDataset):
        def __iter__(self):
            return iter([{"ids": [1, 2], "mask": [1, 1]}, sample])

    fields = ["ids", "mask"] if "mask" in sample else ["ids"]
    with pytest.raises(CollateError, match=message) as caught:
        list(PackedStream(Two(), 16, fields=fields, too_long="raise"))
    assert "sample 1 of the epoch" in str(caught.value)


# -- found in review: a pad value the field's dtype cannot hold, object fields a state cannot carry


class _Typed(StreamDataset):
    """Two samples of one field of ``dtype`` (the second longer than the first's row room)."""

    def __init__(self, dtype) -> None:
        self.dtype = dtype

    def __iter__(self):
        yield {"ids": np.array([1, 2, 3], dtype=self.dtype)}
        yield {"ids": np.array([4, 5, 6, 7, 8, 9], dtype=self.dtype)}


@pytest.mark.parametrize("dtype,pad", [(np.uint8, -1), (np.int8, 300), (np.int32, 0.5)])
def test_a_pad_value_the_fields_dtype_cannot_hold_is_an_error_naming_it(dtype, pad):
    with pytest.raises(ArgumentValueError, match=r"pad_value .* for the field 'ids' does not fit its dtype"):
        list(PackedStream(_Typed(dtype), 8, pad_value={"ids": pad}))


def test_a_pad_value_that_fits_pads_in_the_fields_dtype():
    rows = list(PackedStream(_Typed(np.uint8), 8, pad_value=255.0, buffer_size=1))
    assert all(row["ids"].dtype == np.uint8 for row in rows)
    assert rows[-1]["ids"].tolist() == [1, 2, 3, 255, 255, 255, 255, 255]
    # A float its dtype rounds is a float pad all the same (PadCollator's rule: rounding aside).
    rows = list(PackedStream(_Typed(np.float32), 8, pad_value=0.1, buffer_size=1))
    assert rows[-1]["ids"].dtype == np.float32 and rows[-1]["ids"][-1] == np.float32(0.1)


def test_an_object_field_is_refused_at_its_first_sample():
    class Words(StreamDataset):
        def __iter__(self):
            for number in range(6):
                yield {"ids": np.array([f"w{k}" for k in range(number + 1)], dtype=object)}

    # A state would carry the objects' addresses, which no resume can read back: refused up front.
    with pytest.raises(CollateError, match="field 'ids' of sample 0 of the epoch is an object array"):
        list(PackedStream(Words(), 4, buffer_size=1))


def test_a_row_of_tokens_held_back_once_is_not_held_back_again():
    from dataloader.packing._fit import Placement
    from dataloader.packing._run import _hold_back
    from dataloader.packing._window import Window

    # Three samples of 2, 7 and 5 tokens in rows of 8: the first (carried in from the window
    # before) sits alone in the emptiest row; the next emptiest row holds the third.
    lengths = np.array([2, 7, 5], dtype=np.int64)
    placement = Placement(np.array([0, 2, 9]), lengths, np.array([0, 1, 2]), np.zeros(3, dtype=np.int64), 3)
    columns = {"ids": np.arange(14)}
    kept, carry = _hold_back(Window(columns, lengths, False, carried=2), placement, 8)
    assert carry is not None and carry.lengths.tolist() == [5] and carry.columns["ids"].tolist() == [9, 10, 11, 12, 13]
    assert kept.rows == 2 and kept.row.tolist() == [0, 1] and kept.source.tolist() == [0, 2]
    kept, carry = _hold_back(Window(columns, lengths, False), placement, 8)  # nothing carried in: the emptiest
    assert carry is not None and carry.lengths.tolist() == [2] and kept.row.tolist() == [0, 1]


def test_best_fit_keeps_the_held_back_pieces_together_in_its_last_row():
    # A held-back piece of 3 (first=1), a sample's full piece of 8 and its rest of 2: the rest joins
    # the held-back row, which comes last so that the rest follows its full piece.
    row, offset, count = best_fit_decreasing(np.array([3, 8, 2]), 8, first=1)
    assert count == 2 and row.tolist() == [1, 0, 1] and offset.tolist() == [0, 0, 3]


@pytest.mark.parametrize("parallel", [False, True], ids=["packed in the main process", "packed in workers"])
def test_a_sample_too_long_mid_epoch_ends_the_loader_with_its_error_and_leaves_nothing(no_leaks, parallel):
    lengths = [3] * 40 + [30] + [3] * 40  # sample 40 is longer than seq_len
    stream = PackedStream(Samples(lengths), 16, fields=PAIR, too_long="raise", buffer_size=1)
    loader = DataLoader(stream, StreamSampler(batch_size=2), num_workers=2, parallel_stream=parallel,
                        multiprocessing_context="fork")
    with pytest.raises(Exception, match=r"sample 40 of the epoch.* has 30 tokens, more than seq_len=16") as raised:
        for _ in loader:
            pass
    # The packer's CollateError; from a worker, a CollateError that is also the loader's
    # WorkerError, naming the worker (a worker numbers the samples of its own share: 40 here, where
    # every worker reads the whole plain stream).
    assert isinstance(raised.value, CollateError)
    assert isinstance(raised.value, WorkerError) == parallel
