"""A resume state is refused wherever it would lose or repeat rows: another stream, an edited
state, a state that only covers one of two open epochs; and kept exact where it fits (after a
``break``, a stream that updates its state in place, an unseeded loader)."""

from __future__ import annotations

import copy
import json
import pickle
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dataloader
from dataloader.transform import Transform
from dataloader import (
    ArgumentTypeError,
    ArgumentValueError,
    ArrayDataset,
    CallableSource,
    DataLoader,
    Dataset,
    ParquetDataset,
    ParquetStream,
    RandomSampler,
    StreamDataset,
    StreamSampler,
)


def _write(directory: Path, rows: int, files: int = 2, group: int = 25, first: int = 0) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    per_file = rows // files
    for number in range(files):
        ids = np.arange(first + number * per_file, first + (number + 1) * per_file, dtype=np.int64)
        pq.write_table(pa.table({"id": ids}), directory / f"part-{number}.parquet", row_group_size=group)
    return directory


def _ids(loader: DataLoader) -> list[list[int]]:
    return [np.asarray(batch["id"]).tolist() for batch in loader]


def _stream_loader(folder: Path, **options) -> DataLoader:
    workers = options.pop("num_workers", 0)
    parallel = options.pop("parallel_stream", False)
    stream = ParquetStream(folder, batch_size=10, **{"shuffle": True, "seed": 0, **options})
    return DataLoader(stream, StreamSampler(), num_workers=workers, parallel_stream=parallel)


def _state_after(loader: DataLoader, batches: int) -> dict:
    with iter(loader) as epoch:
        for _ in range(batches):
            next(epoch)
        return loader.state_dict()


# --- 1. a stream's state carries what decides its order --------------------------------------


@pytest.mark.parametrize(
    "saved, other, field",
    [
        ({"seed": 0}, {"seed": 1}, "stream.seed"),
        ({"shuffle": False}, {"shuffle": True}, "stream.shuffle"),
        ({"shuffle_buffer": 50}, {"shuffle_buffer": 20}, "stream.shuffle_buffer"),
    ],
)
def test_a_parquet_stream_state_is_refused_by_a_stream_that_orders_rows_otherwise(tmp_path, saved, other, field):
    folder = _write(tmp_path / "data", 200)
    state = _state_after(_stream_loader(folder, **saved), 3)
    with pytest.raises(ArgumentValueError, match=rf"saved by a loader with {field}="):
        _stream_loader(folder, **other).load_state_dict(state)


def test_another_ranks_stream_state_alone_is_refused_saying_to_pass_every_ranks(tmp_path):
    folder = _write(tmp_path / "data", 200)
    state = _state_after(_stream_loader(folder, world_size=2, rank=0), 3)
    with pytest.raises(ArgumentValueError, match="one rank's state cannot resume ParquetStream.*list of every rank"):
        _stream_loader(folder, world_size=2, rank=1).load_state_dict(state)


def test_another_file_set_is_refused_and_the_same_files_elsewhere_are_not(tmp_path):
    folder = _write(tmp_path / "a", 200)
    state = _state_after(_stream_loader(folder, shuffle=False), 3)
    other = _write(tmp_path / "b", 200, files=4)
    with pytest.raises(ArgumentValueError, match=r"stream\.files="):
        _stream_loader(other, shuffle=False).load_state_dict(state)
    regrouped = _write(tmp_path / "c", 200, group=10)
    with pytest.raises(ArgumentValueError, match=r"stream\.row_groups="):
        _stream_loader(regrouped, shuffle=False).load_state_dict(state)
    copied = tmp_path / "copy" / "elsewhere"  # the same files under another root, with their times (cp -p)
    shutil.copytree(folder, copied, copy_function=shutil.copy2)
    whole = _ids(_stream_loader(folder, shuffle=False))
    resumed = _stream_loader(copied, shuffle=False)
    resumed.load_state_dict(state)
    assert whole[:3] + _ids(resumed) == whole


def test_a_parallel_stream_state_is_refused_by_another_seed_even_with_skip_ahead(tmp_path):
    folder = _write(tmp_path / "data", 200)
    state = _state_after(_stream_loader(folder, num_workers=2, parallel_stream=True), 3)
    with pytest.raises(ArgumentValueError, match=r"stream\.seed="):
        _stream_loader(folder, seed=1, num_workers=2, parallel_stream=True).load_state_dict(state, skip_ahead=True)


class _Counting(StreamDataset):
    def __init__(self, count: int = 20) -> None:
        self.count = count

    def __iter__(self):
        return iter(range(self.count))


class _OtherCounting(_Counting):
    pass


def test_a_stream_of_another_class_is_refused_by_name():
    state = _state_after(DataLoader(_Counting(), StreamSampler(batch_size=4)), 2)
    with pytest.raises(ArgumentValueError, match=r"stream\.type=.*_Counting.*_OtherCounting"):
        DataLoader(_OtherCounting(), StreamSampler(batch_size=4)).load_state_dict(state, skip_ahead=True)


def _numbers(size: int) -> list:
    return list(range(size))


def _letters(size: int) -> list:
    return ["a"] * size


def test_a_callable_source_state_is_refused_by_another_function():
    state = _state_after(DataLoader(CallableSource(_numbers), StreamSampler(batch_size=2)), 2)
    with pytest.raises(ArgumentValueError, match=r"stream\.data_source="):
        DataLoader(CallableSource(_letters), StreamSampler(batch_size=2)).load_state_dict(state, skip_ahead=True)


def test_a_map_parquet_dataset_of_other_files_of_the_same_length_is_refused(tmp_path):
    first = ParquetDataset(_write(tmp_path / "a", 100))
    other = ParquetDataset(_write(tmp_path / "b", 100, files=1))
    state = _state_after(DataLoader(first, batch_size=10), 2)
    with pytest.raises(ArgumentValueError, match=r"dataset\.files="):
        DataLoader(other, batch_size=10).load_state_dict(state)


def _tree(root: Path, names: list[str]) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"not read")
    return root


def test_an_image_folder_of_other_files_is_refused_and_the_same_tree_elsewhere_is_not(tmp_path):
    def loader(root: Path) -> DataLoader:
        return DataLoader(dataloader.ImageFolder(root, check_valid_func=lambda path: True), batch_size=2)

    state = loader(_tree(tmp_path / "a", ["cat/1.jpg", "cat/2.jpg", "dog/3.jpg"])).state_dict()
    with pytest.raises(ArgumentValueError, match=r"dataset\.files="):
        loader(_tree(tmp_path / "b", ["cat/1.jpg", "cat/9.jpg", "dog/3.jpg"])).load_state_dict(state)
    with pytest.raises(ArgumentValueError, match=r"dataset\.classes="):
        loader(_tree(tmp_path / "c", ["cat/1.jpg", "cat/2.jpg", "emu/3.jpg"])).load_state_dict(state)
    loader(_tree(tmp_path / "deeper" / "copy", ["cat/1.jpg", "cat/2.jpg", "dog/3.jpg"])).load_state_dict(state)


def test_a_parquet_stream_refuses_a_position_of_another_epoch(tmp_path):
    stream = ParquetStream(_write(tmp_path / "data", 100), batch_size=10)
    stream.set_epoch(1)
    stream.load_state_dict({**stream.state_dict(), "epoch": 0, "rows": 30})
    with pytest.raises(ArgumentValueError, match="position in epoch 0, but this iter.. reads epoch 1"):
        iter(stream)


# --- 2. an edited or corrupted state is refused ------------------------------------------------


def _map_loader(**options) -> DataLoader:
    dataset = ArrayDataset(np.arange(1000))
    return DataLoader(dataset, RandomSampler(dataset, batch_size=20, seed=3), seed=5, **options)


def _edited(state: dict, path: str, value) -> dict:
    state = copy.deepcopy(state)
    *parents, last = path.split(".")
    place = state
    for key in parents:
        place = place[key]
    place[last] = value
    return state


EDITS = [
    ("low", -1, ArgumentValueError, r"low is -1, outside"),
    ("low", 3, ArgumentValueError, r"count is 7 but low and above say 3"),
    ("low", True, ArgumentTypeError, r"low must be an int; got bool"),
    ("low", 10**9, ArgumentValueError, r"low is 1000000000, outside"),
    ("low", "7", ArgumentTypeError, r"low must be an int; got str"),
    ("above", [8, 9], ArgumentValueError, r"count is 7 but low and above say 9"),
    ("above", [8, 8], ArgumentValueError, r"above lists a batch twice"),
    ("above", [2], ArgumentValueError, r"above is 2, outside"),
    ("above", None, ArgumentTypeError, r"above must be a list"),
    ("count", -3, ArgumentValueError, r"count is -3, outside"),
    ("workers", "x", ArgumentTypeError, r"workers must be a dict"),
    ("workers", {"w": 1}, ArgumentValueError, r"workers has the key 'w'"),
    ("last_worker", 4, ArgumentValueError, r"last_worker is 4, a worker that handed out no batch"),
    ("partial", [[1, 1]], ArgumentTypeError, r"partial entries are \[index, times, worker\]"),
    ("partial", [[7, 1, -1]], ArgumentValueError, r"with repeats=1 nothing is echoed"),
    ("source", [], ArgumentTypeError, r"source must be a dict"),
    ("source.sampler.epoch", 3, ArgumentValueError, r"source\.sampler\.epoch is 3 but it resumes epoch 0"),
    ("epoch", 7, ArgumentValueError, r"source\.sampler\.epoch is 0 but it resumes epoch 7"),
    ("epoch", -1, ArgumentValueError, r"epoch is -1, outside"),
    ("epoch", 1.5, ArgumentTypeError, r"epoch must be an int"),
    ("config", None, ArgumentTypeError, r"config must be a dict"),
]


@pytest.mark.parametrize("path, value, error, message", EDITS, ids=[f"{p}={v!r}" for p, v, *_ in EDITS])
def test_an_edited_state_is_refused_by_its_digest_and_its_fields_are_checked_anyway(path, value, error, message):
    state = _state_after(_map_loader(), 7)
    edited = _edited(state, path, value)
    with pytest.raises(ArgumentValueError, match="digest does not match its contents"):
        _map_loader().load_state_dict(edited)
    with pytest.raises(error, match=message):
        _map_loader().load_state_dict(edited, allow_edited=True)


def test_an_unedited_state_passes_json_pickle_and_a_tuple_for_a_list():
    loader = _map_loader(num_workers=0)
    state = _state_after(loader, 7)
    for copied in (json.loads(json.dumps(state)), pickle.loads(pickle.dumps(state))):
        resumed = _map_loader()
        resumed.load_state_dict(copied)
        assert len(list(resumed)) == 50 - 7
    as_tuples = _edited(state, "above", tuple(state["above"]))
    _map_loader().load_state_dict(as_tuples)  # the same contents, as pickle may keep them


def test_an_edited_state_that_is_still_consistent_loads_with_allow_edited():
    whole = [b.tolist() for (b,) in _map_loader()]
    state = _state_after(_map_loader(), 7)
    moved = _edited(state, "low", 9)
    moved["count"] = 9
    resumed = _map_loader()
    resumed.load_state_dict(moved, allow_edited=True)
    assert [b.tolist() for (b,) in resumed] == whole[9:]


# --- 3. two open epochs ------------------------------------------------------------------------


def test_a_state_taken_with_an_older_epoch_still_open_warns_that_it_leaves_it_out():
    loader = _map_loader()
    first = iter(loader)
    next(first)
    second = iter(loader)
    next(second)
    with pytest.warns(dataloader.ResumeWarning, match=r"describes epoch 1 only, but the iterator of epoch 0 is open"):
        loader.state_dict()
    first.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loader.state_dict()["epoch"] == 1
    second.close()


# --- 7. a stream that keeps updating the dict its state_dict() returns -------------------------


class _InPlace(StreamDataset):
    """Returns the same dict from every state_dict(), and updates it as it reads."""

    def __init__(self, count: int = 10) -> None:
        self.count = count
        self.state = {"next": 0}
        self._start = 0

    def __iter__(self):
        first, self._start = self._start, 0
        self.state["next"] = first
        return self._read(first)

    def _read(self, first: int):
        for value in range(first, self.count):
            self.state["next"] = value + 1
            yield value

    def state_dict(self) -> dict:
        return self.state

    def load_state_dict(self, state: dict) -> None:
        self._start = state["next"]


@pytest.mark.parametrize("timeout", [0, 5])
def test_a_stream_state_kept_by_reference_is_copied_when_captured(timeout):
    loader = DataLoader(_InPlace(), StreamSampler(batch_size=2), timeout=timeout)
    with iter(loader) as epoch:
        head = [next(epoch).tolist() for _ in range(2)]
        state = loader.state_dict()
        assert state["source"] == {"stream": {"next": 4}}
        rest = [batch.tolist() for batch in epoch]
    assert state["source"] == {"stream": {"next": 4}}  # reading on did not move it
    resumed = DataLoader(_InPlace(), StreamSampler(batch_size=2), timeout=timeout)
    resumed.load_state_dict(state)
    with iter(resumed) as epoch:
        before_first = resumed.state_dict()  # taken before the resumed epoch's first batch
        assert before_first["source"] == {"stream": {"next": 4}}
        assert [batch.tolist() for batch in epoch] == rest
    again = DataLoader(_InPlace(), StreamSampler(batch_size=2), timeout=timeout)
    again.load_state_dict(before_first)
    assert head + [batch.tolist() for batch in again] == head + rest


# --- 8. seed=None ------------------------------------------------------------------------------


class _Noisy(Dataset):
    """Each sample draws from NumPy's global generator in __getitem__."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, index: int):
        return np.float64(index + np.random.random())


@pytest.mark.parametrize("workers", [0, 2])
def test_an_unseeded_loader_carries_its_drawn_seed_so_a_resume_draws_the_same(workers):
    # Processes: the global generators are seeded per batch there (thread workers share them).
    loader = DataLoader(_Noisy(), batch_size=4, num_workers=workers, worker_type="process")
    whole = [batch.tolist() for batch in loader]
    loader.set_epoch(0)
    state = _state_after(loader, 3)
    assert isinstance(state["base_seed"], int)
    resumed = DataLoader(_Noisy(), batch_size=4, num_workers=2 - workers, worker_type="process")  # another seed drawn
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert whole[:3] + [batch.tolist() for batch in resumed] == whole


def test_an_unseeded_loader_follows_the_programs_own_seeding():
    def run() -> list:
        np.random.seed(11)
        torch = sys.modules.get("torch")
        if torch is not None:  # then torch's generator gives the seed, as in PyTorch
            torch.manual_seed(11)
        return [batch.tolist() for batch in DataLoader(_Noisy(), batch_size=4)]

    assert run() == run()
    assert DataLoader(_Noisy(), batch_size=4).state_dict()["base_seed"] != DataLoader(_Noisy(), batch_size=4).state_dict()["base_seed"]


def test_torch_manual_seed_fixes_an_unseeded_loaders_draws():
    torch = pytest.importorskip("torch", reason="torch is an optional extra")

    def run() -> list:
        torch.manual_seed(3)
        return [batch.tolist() for batch in DataLoader(_Noisy(), batch_size=4, num_workers=2, worker_type="process")]

    assert run() == run()


# --- 11. a stream's own random draws follow the loader's seed ----------------------------------


class _Drawing(StreamDataset):
    """Each worker yields 6 draws from NumPy's global generator, as its shard."""

    def __iter__(self):
        for _ in range(6):
            yield np.float64(np.random.random())


def _draws(seed: int, persistent: bool = False) -> list:
    loader = DataLoader(_Drawing(), StreamSampler(batch_size=3), num_workers=2, parallel_stream=True,
                        seed=seed, persistent_workers=persistent, worker_type="process")
    return [sorted(np.asarray(batch).tolist()) for _ in range(2) for batch in loader]


def test_the_draws_of_a_stream_read_by_workers_follow_the_loaders_seed_and_epoch():
    first = _draws(seed=0)
    assert first == _draws(seed=0) == _draws(seed=0, persistent=True)  # not the worker's past
    assert first != _draws(seed=1)
    assert first[:4] != first[4:]  # epoch 1 draws anew


# --- relatives: a fixed-size feed left early --------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("leave", ["break", "superseded"])
def test_a_fixed_size_feed_left_early_goes_on_from_the_first_batch_not_handed_out(workers, leave):
    """Batches the workers read ahead of a ``break`` are the next epoch's first, not lost."""
    loader = DataLoader(ArrayDataset(np.arange(100)), batch_size=5, epoch_size=4, num_workers=workers)
    seen = []
    if leave == "break":
        for count, (batch,) in enumerate(loader, 1):
            seen.append(batch.tolist())
            if count == 2:
                break
    else:
        open_epoch = iter(loader)
        seen += [next(open_epoch)[0].tolist() for _ in range(2)]
    for _ in range(2):
        seen += [batch.tolist() for (batch,) in loader]
    assert seen == [list(range(start, start + 5)) for start in range(0, 50, 5)]


def test_a_fixed_size_feed_over_a_seekable_stream_left_early_loses_nothing(tmp_path):
    stream = ParquetStream(_write(tmp_path / "data", 100), batch_size=None)
    loader = DataLoader(stream, StreamSampler(batch_size=5), epoch_size=4, num_workers=2)
    seen = []
    for count, batch in enumerate(loader, 1):
        seen += np.asarray(batch["id"]).tolist()
        if count == 2:
            break
    for _ in range(2):
        seen += [row for batch in loader for row in np.asarray(batch["id"]).tolist()]
    assert seen == list(range(50))


# --- a stream read by workers: each batch seeded by its place in the shards ---------------------


class _Uneven(StreamDataset):
    """Worker 0 reads 20 samples, worker 1 only 4: worker 1 drops out of the turns early."""

    def __iter__(self):
        worker = dataloader.get_worker_info().id
        return iter(range(worker * 1000, worker * 1000 + (20, 4)[worker]))


class _Jitter(Transform):
    def apply(self, value):
        return value + int(dataloader.batch_rng().integers(100)) / 1000


def _uneven() -> DataLoader:
    return DataLoader(_Uneven(), StreamSampler(batch_size=2), transform=_Jitter(), num_workers=2,
                      parallel_stream=True, seed=0)


def test_a_stream_read_by_workers_draws_alike_in_every_run_and_in_a_resume():
    whole = [batch.tolist() for batch in _uneven()]
    for _ in range(3):  # when worker 1's end is seen does not move the draws
        assert [batch.tolist() for batch in _uneven()] == whole
    for cut in (1, 3, 4, 9):
        assert _cut_and_resumed(_uneven, cut) == whole


def _cut_and_resumed(make, cut: int) -> list:
    """``cut`` batches of a loader ``make()`` builds, then the rest from a fresh one that loaded
    the state taken there (re-reading the workers' shards: ``skip_ahead``)."""
    loader = make()
    with iter(loader) as batches:
        head = [next(batches).tolist() for _ in range(cut)]
        state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(state, skip_ahead=True)
    return head + [batch.tolist() for batch in resumed]


def test_a_pickled_unseeded_loader_makes_the_same_batches():
    loader = DataLoader(_Noisy(), batch_size=4)
    assert [b.tolist() for b in pickle.loads(pickle.dumps(loader))] == [b.tolist() for b in loader]


def test_a_shuffle_without_a_seed_follows_the_programs_own_seeding():
    def order() -> list:
        np.random.seed(4)
        torch = sys.modules.get("torch")
        if torch is not None:  # torch's generator gives the sampler its seed, as in PyTorch
            torch.manual_seed(4)
        return [batch.tolist() for (batch,) in DataLoader(ArrayDataset(np.arange(30)), batch_size=5, shuffle=True)]

    assert order() == order()
    assert order() != sorted(order())


class _UnevenDrawing(StreamDataset):
    """Uneven shards whose samples draw from NumPy's global generator as they are read."""

    def __iter__(self):
        worker = dataloader.get_worker_info().id
        for value in range(worker * 1000, worker * 1000 + (14, 4)[worker]):
            yield value + np.random.random()


def test_a_resumed_worker_that_skips_batches_draws_from_the_stream_as_the_saving_run_did():
    def loader() -> DataLoader:
        return DataLoader(_UnevenDrawing(), StreamSampler(batch_size=2), transform=_Jitter(), num_workers=2,
                          parallel_stream=True, seed=3, worker_type="process")

    whole = [batch.tolist() for batch in loader()]
    for cut in (2, 5):
        assert _cut_and_resumed(loader, cut) == whole


def test_a_state_of_the_previous_format_is_refused_with_what_to_do():
    state = dict(_state_after(_map_loader(), 2), format="dataloader.state/1")
    with pytest.raises(ArgumentValueError, match=r"an older version of dataloader: resume at an epoch boundary"):
        _map_loader().load_state_dict(state)
