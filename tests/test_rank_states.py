"""dataloader.rank_states: every rank's loader state in one list (gathered, or one file per rank),
and every refusal, each naming what is wrong."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from dataloader import (
    ArgumentTypeError,
    ArgumentValueError,
    ArrayDataset,
    DataFileError,
    DataLoader,
    RandomSampler,
    StreamDataset,
    StreamSampler,
    gather_states,
    load_rank_states,
    save_rank_state,
)


def rank_state(rank: int, world: int, batches: int = 1) -> dict:
    """The state of rank ``rank`` of ``world`` after ``batches`` batches of a shuffled map loader."""
    dataset = ArrayDataset(np.arange(40))
    sampler = RandomSampler(dataset, batch_size=3, seed=7, world_size=world, rank=rank)
    loader = DataLoader(dataset, sampler, seed=1)
    it = iter(loader)
    for _ in range(batches):
        next(it)
    return loader.state_dict()


def loader_for(rank: int, world: int) -> DataLoader:
    dataset = ArrayDataset(np.arange(40))
    return DataLoader(dataset, RandomSampler(dataset, batch_size=3, seed=7, world_size=world, rank=rank), seed=1)


class _Numbers(StreamDataset):
    def __iter__(self):
        return iter(range(30))


def unsharded_state() -> dict:
    """A loader's state whose config has no world (a stream not sharded by rank)."""
    loader = DataLoader(_Numbers(), StreamSampler(batch_size=4))
    next(iter(loader))
    return loader.state_dict()


# -- the files ---------------------------------------------------------------------------------


def test_round_trip_in_rank_order_and_each_state_loads(tmp_path: Path) -> None:
    folder = tmp_path / "step-100" / "loader"  # made, parents too
    states = [rank_state(rank, 4, batches=2) for rank in range(4)]
    paths = [save_rank_state(folder, states[rank]) for rank in (2, 0, 3, 1)]
    assert [Path(p).name for p in paths] == [
        "rank-00002-of-00004.json", "rank-00000-of-00004.json", "rank-00003-of-00004.json", "rank-00001-of-00004.json",
    ]
    assert sorted(os.listdir(folder)) == sorted(Path(p).name for p in paths)  # no temporary left
    loaded = load_rank_states(folder)
    assert loaded == states
    for rank, state in enumerate(loaded):  # the JSON round trip keeps each digest whole
        reference, resumed = loader_for(rank, 4), loader_for(rank, 4)
        ref = iter(reference)
        next(ref), next(ref)
        resumed.load_state_dict(state)
        assert [b[0].tolist() for b in resumed] == [b[0].tolist() for b in ref]


def test_saving_again_replaces_the_file_and_other_files_are_left_alone(tmp_path: Path) -> None:
    (tmp_path / "model.pt").write_bytes(b"weights")
    (tmp_path / ".rank-00000-of-00001.json.123.part").write_text("{half")  # a killed writer's
    save_rank_state(tmp_path, rank_state(0, 1, batches=1))
    newer = rank_state(0, 1, batches=3)
    save_rank_state(tmp_path, newer)
    assert load_rank_states(tmp_path) == [newer]
    assert (tmp_path / "model.pt").read_bytes() == b"weights"


def test_a_loader_without_a_world_is_rank_0_of_1(tmp_path: Path) -> None:
    state = unsharded_state()
    assert Path(save_rank_state(tmp_path, state)).name == "rank-00000-of-00001.json"
    assert load_rank_states(tmp_path) == [state]
    assert gather_states(state)[0] is state


def test_a_failed_write_leaves_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = rank_state(0, 2)
    save_rank_state(tmp_path, first)

    def failing_replace(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        save_rank_state(tmp_path, rank_state(0, 2, batches=3))
    assert sorted(os.listdir(tmp_path)) == ["rank-00000-of-00002.json"]
    assert json.loads((tmp_path / "rank-00000-of-00002.json").read_text()) == first


def test_missing_ranks_are_named(tmp_path: Path) -> None:
    for rank in (0, 2):
        save_rank_state(tmp_path, rank_state(rank, 4))
    with pytest.raises(ArgumentValueError, match=r"lacks the states of ranks \[1, 3\] of a world of 4"):
        load_rank_states(tmp_path)


def test_many_missing_ranks_are_cut_short(tmp_path: Path) -> None:
    save_rank_state(tmp_path, rank_state(5, 20))
    with pytest.raises(ArgumentValueError, match=r"ranks \[0, 1, 2, 3, 4, 6, 7, 8, \.\.\.\] \(19\) of a world of 20"):
        load_rank_states(tmp_path)


def test_two_world_sizes_are_refused(tmp_path: Path) -> None:
    for rank in range(2):
        save_rank_state(tmp_path, rank_state(rank, 2))
    save_rank_state(tmp_path, rank_state(0, 4))
    with pytest.raises(ArgumentValueError, match=r"mixes states of world sizes \[2, 4\].*folder of its own"):
        load_rank_states(tmp_path)


@pytest.mark.parametrize("name", ["rank-1-of-2.json", "rank-00002-of-00002.json", "rank-notes.json"])
def test_stray_files_of_the_pattern_are_refused(tmp_path: Path, name: str) -> None:
    for rank in range(2):
        save_rank_state(tmp_path, rank_state(rank, 2))
    (tmp_path / name).write_text("{}")
    with pytest.raises(ArgumentValueError, match=rf"holds \['{name}'\], named like a rank's state"):
        load_rank_states(tmp_path)


@pytest.mark.parametrize("text", ['{"format": "dataloader.state/3", "epo', "", "\xff\xfe"])
def test_an_unreadable_file_is_named(tmp_path: Path, text: str) -> None:
    save_rank_state(tmp_path, rank_state(0, 2))
    broken = tmp_path / "rank-00001-of-00002.json"
    broken.write_bytes(text.encode("latin-1"))
    with pytest.raises(DataFileError, match="rank-00001-of-00002.json' cannot be read as a rank's state") as caught:
        load_rank_states(tmp_path)
    assert caught.value.path == str(broken)


def test_a_renamed_file_is_refused(tmp_path: Path) -> None:
    save_rank_state(tmp_path, rank_state(0, 2))
    os.replace(save_rank_state(tmp_path / "other", rank_state(0, 2)), tmp_path / "rank-00001-of-00002.json")
    with pytest.raises(DataFileError, match=r"holds the state of rank 0 of a world of 2, not the rank 1 of 2"):
        load_rank_states(tmp_path)


def test_a_file_that_is_not_a_state_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rank-00000-of-00001.json").write_text("[1, 2]")
    with pytest.raises(DataFileError, match=r"00001.json'.*must be the dict DataLoader.state_dict\(\) returned"):
        load_rank_states(tmp_path)


def test_no_folder_or_an_empty_one(tmp_path: Path) -> None:
    with pytest.raises(ArgumentValueError, match="is not a folder"):
        load_rank_states(tmp_path / "nowhere")
    with pytest.raises(ArgumentValueError, match="holds no rank-RRRRR-of-WWWWW.json file"):
        load_rank_states(tmp_path)


def test_save_refuses_what_is_not_a_state(tmp_path: Path) -> None:
    with pytest.raises(ArgumentTypeError, match=r"save_rank_state: `state` must be the dict .* got list"):
        save_rank_state(tmp_path, [rank_state(0, 1)])  # type: ignore[arg-type]
    edited = rank_state(0, 2)
    edited["config"]["rank"] = 2
    with pytest.raises(ArgumentValueError, match="says rank 2 of a world of 2, not a rank in"):
        save_rank_state(tmp_path, edited)
    odd = rank_state(0, 2)
    odd["extra"] = np.int64(3)
    with pytest.raises(ArgumentTypeError, match="holds a value JSON cannot write"):
        save_rank_state(tmp_path, odd)
    assert os.listdir(tmp_path) == []


# -- gather_states -----------------------------------------------------------------------------


def test_gather_in_a_world_of_one_needs_no_communication() -> None:
    state = rank_state(0, 1)
    assert gather_states(state) == [state]


def test_gather_without_torch_distributed_says_to_use_the_files() -> None:
    with pytest.raises(ArgumentValueError, match=r"rank 1 of a world of 4.*save_rank_state\(folder, state\)"):
        gather_states(rank_state(1, 4))
    with pytest.raises(ArgumentValueError, match="`group` was given"):
        gather_states(rank_state(0, 1), group="dp")


class _FakeDistributed(types.ModuleType):
    """torch.distributed as gather_states sees it: every rank's state already at hand."""

    def __init__(self, states: list) -> None:
        super().__init__("torch.distributed")
        self.states, self.groups = states, []

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def get_world_size(self, group=None) -> int:
        return len(self.states)

    def all_gather_object(self, out: list, obj: object, group=None) -> None:
        self.groups.append(group)
        out[:] = self.states


def with_fake(monkeypatch: pytest.MonkeyPatch, states: list) -> _FakeDistributed:
    fake = _FakeDistributed(states)
    monkeypatch.setitem(sys.modules, "torch.distributed", fake)
    return fake


def test_gather_puts_the_states_in_rank_order(monkeypatch: pytest.MonkeyPatch) -> None:
    states = [rank_state(rank, 3) for rank in range(3)]
    fake = with_fake(monkeypatch, [states[2], states[0], states[1]])  # a group's order
    assert gather_states(states[1], group="dp") == states
    assert fake.groups == ["dp"]


def test_gather_refuses_a_rank_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    states = [rank_state(rank, 2) for rank in range(2)]
    with_fake(monkeypatch, states + states)  # tensor-parallel peers gathered too
    with pytest.raises(ArgumentValueError, match=r"hold rank 0 twice \(4 states for a world of 2\).*data-parallel"):
        gather_states(states[0])


def test_gather_refuses_missing_ranks_and_mixed_worlds(monkeypatch: pytest.MonkeyPatch) -> None:
    with_fake(monkeypatch, [rank_state(0, 3), rank_state(2, 3)])
    with pytest.raises(ArgumentValueError, match=r"lack ranks \[1\] of a world of 3"):
        gather_states(rank_state(0, 3))
    with_fake(monkeypatch, [rank_state(0, 2), rank_state(1, 3)])
    with pytest.raises(ArgumentValueError, match="mix world sizes 2 and 3"):
        gather_states(rank_state(0, 2))

