"""Every rank's loader state in one list, in rank order: what a resume on another number of ranks needs.

A loader resumed on ``W'`` ranks from a run of ``W`` ranks takes the states of all ``W`` old ranks
(``loader.load_state_dict(states)``): a stream shards its files over ranks, so one rank's state
does not say where the others stand. Two ways to get the list:

- under ``torch.distributed``, :func:`gather_states` is one ``all_gather_object``;
- without it (plain processes, one machine or a shared file system), each rank writes its own
  file with :func:`save_rank_state` and every new rank reads them all with :func:`load_rank_states`.

A state says which rank of which world saved it (``state["config"]["world_size"]`` and
``["rank"]``); both ways check that the list holds each rank of one world exactly once. torch is
never imported here: :func:`gather_states` uses it only if the program initialized it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, TypeGuard, cast

from .errors import ArgumentTypeError, ArgumentValueError, DataFileError

# One file per rank; the zero padding sorts them in rank order in a listing.
_FILE_NAME = "rank-{rank:05d}-of-{world:05d}.json"
_FILE_PATTERN = re.compile(r"rank-(\d+)-of-(\d+)\.json")
_LOOSE_GLOB = "rank-*.json"  # what a stray file of the pattern looks like
_SHOWN = 8  # ranks or files named in one message before "..."


def gather_states(state: dict[str, Any], group: Any = None) -> list[dict[str, Any]]:
    """Every rank's ``loader.state_dict()`` in rank order, gathered from all ranks; each rank
    calls it with its own state at the same step (a collective under ``torch.distributed``).

    A world of one returns ``[state]`` without communicating. In a larger world
    ``torch.distributed`` must be initialized (``group``: the data-parallel process group, when
    other ranks share the same data); without it, use :func:`save_rank_state` and
    :func:`load_rank_states` over a shared folder.
    """
    world, _ = _world_of(state, "gather_states")
    dist = _torch_distributed()
    if group is not None and dist is None:
        raise ArgumentValueError(
            f"gather_states: `group` was given ({group!r}) but torch.distributed is not initialized; "
            "call torch.distributed.init_process_group() first, or leave `group` out."
        )
    if world == 1:
        return [state]
    if dist is None:
        raise ArgumentValueError(
            f"gather_states: the state is rank {state['config']['rank']} of a world of {world}, and "
            "torch.distributed is not initialized, so the other ranks' states cannot be gathered. "
            "Initialize it (torchrun and torch.distributed.init_process_group()), or have each rank "
            "write its state with save_rank_state(folder, state) and read them all with "
            "load_rank_states(folder)."
        )
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, state, group=group)
    return _in_rank_order(gathered, world, "the states gathered by all_gather_object")


def save_rank_state(folder: str | os.PathLike[str], state: dict[str, Any]) -> str:
    """Write ``state`` to ``folder`` as ``rank-RRRRR-of-WWWWW.json`` (its rank and world size
    from the state) and return the file's path; the folder is created if missing.

    The file is written under a temporary name and renamed into place when whole, so a rank
    killed while writing leaves the previous file (or none), never half of one. Use one folder
    per checkpoint: :func:`load_rank_states` refuses files of two world sizes.
    """
    world, rank = _world_of(state, "save_rank_state")
    try:
        text = json.dumps(state)
    except (TypeError, ValueError) as error:
        raise ArgumentTypeError(
            f"save_rank_state: the state holds a value JSON cannot write ({error}); a "
            "DataLoader.state_dict() is plain JSON values. Pass the state as state_dict() returned "
            "it, or save it yourself (torch.save, pickle), one file per rank."
        ) from None
    directory = Path(folder)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / _FILE_NAME.format(rank=rank, world=world)
    temporary = directory / f".{path.name}.{os.getpid()}.part"  # hidden: not of the pattern
    try:
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return str(path)


def load_rank_states(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The states :func:`save_rank_state` wrote to ``folder``, in rank order.

    Refuses a folder that lacks a rank's file, mixes two world sizes, holds a stray
    ``rank-*.json`` not named as :func:`save_rank_state` names them, or a file that is not the
    JSON state its name says; other files in the folder (a model's checkpoint) are left alone.
    """
    directory = Path(folder)
    if not directory.is_dir():
        raise ArgumentValueError(
            f"load_rank_states: {str(directory)!r} is not a folder. Pass the folder every rank "
            "wrote its state to with save_rank_state(folder, state)."
        )
    named = _rank_files(directory)
    worlds = sorted({world for _, world in named.values()})
    if not worlds:
        raise ArgumentValueError(
            f"load_rank_states: {str(directory)!r} holds no rank-RRRRR-of-WWWWW.json file. Have "
            "every rank write its state there first with save_rank_state(folder, state)."
        )
    if len(worlds) > 1:
        by_world = {w: sorted(p.name for p, (_, pw) in named.items() if pw == w)[:2] for w in worlds}
        raise ArgumentValueError(
            f"load_rank_states: {str(directory)!r} mixes states of world sizes {worlds} "
            f"(e.g. {by_world}): the checkpoints of two runs. Save each checkpoint to a folder "
            "of its own (one per step), and remove the other run's files."
        )
    world = worlds[0]
    missing = sorted(set(range(world)) - {rank for rank, _ in named.values()})
    if missing:
        raise ArgumentValueError(
            f"load_rank_states: {str(directory)!r} lacks the states of ranks {_shown(missing)} "
            f"of a world of {world}: those ranks did not call save_rank_state (or have not yet). "
            "Wait until every rank has saved (a barrier after save_rank_state), or resume from "
            "an earlier checkpoint whose folder is whole."
        )
    in_order = sorted(named.items(), key=lambda item: item[1])
    return [_read_state(path, rank, world) for path, (rank, _) in in_order]


def _rank_files(directory: Path) -> dict[Path, tuple[int, int]]:
    """The rank files of ``directory``, each with its (rank, world) read from its name;
    refuses a file of the pattern that :func:`save_rank_state` would not have named so."""
    named, stray = {}, []
    for path in sorted(directory.glob(_LOOSE_GLOB)):
        match = _FILE_PATTERN.fullmatch(path.name)
        if match is not None:
            rank, world = int(match[1]), int(match[2])
            if rank < world and path.name == _FILE_NAME.format(rank=rank, world=world):
                named[path] = (rank, world)
                continue
        stray.append(path.name)
    if stray:
        raise ArgumentValueError(
            f"load_rank_states: {str(directory)!r} holds {_shown(stray)}, named like a rank's "
            "state but not as save_rank_state names them (rank-RRRRR-of-WWWWW.json with "
            "RRRRR < WWWWW): a file renamed or copied by hand. Remove or rename it."
        )
    return named


def _read_state(path: Path, rank: int, world: int) -> dict[str, Any]:
    """The state in ``path``, checked to be rank ``rank`` of ``world`` as its name says."""
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # UnicodeDecodeError is a ValueError
        raise DataFileError(
            f"load_rank_states: {str(path)!r} cannot be read as a rank's state ({error}): it was "
            "cut short or corrupted. Resume from an earlier checkpoint, or have that rank save "
            "its state again.",
            str(path),
        ) from None
    try:
        saved = _world_of(state, "load_rank_states")
    except (ArgumentTypeError, ArgumentValueError) as error:
        raise DataFileError(f"{str(path)!r}: {error}", str(path)) from None
    if saved != (world, rank):
        raise DataFileError(
            f"load_rank_states: {str(path)!r} holds the state of rank {saved[1]} of a world of "
            f"{saved[0]}, not the rank {rank} of {world} its name says: a file renamed or copied "
            "by hand. Put each rank's file back under the name save_rank_state gave it.",
            str(path),
        )
    return cast(dict[str, Any], state)


def _in_rank_order(states: list[Any], world: int, what: str) -> list[dict[str, Any]]:
    """``states`` sorted by rank, checked to hold each rank of one world of ``world`` once."""
    seen: dict[int, dict[str, Any]] = {}
    for state in states:
        saved_world, rank = _world_of(state, "gather_states")
        if saved_world != world:
            raise ArgumentValueError(
                f"gather_states: {what} mix world sizes {world} and {saved_world}: the ranks' "
                "loaders were built for worlds of different sizes. Build every rank's loader with "
                "the same world_size (or WORLD_SIZE)."
            )
        if rank in seen:
            raise ArgumentValueError(
                f"gather_states: {what} hold rank {rank} twice ({len(states)} states for a world "
                f"of {world}): ranks that share their data (tensor or pipeline parallel) were "
                "gathered too. Pass the data-parallel process group as group=."
            )
        seen[rank] = state
    missing = sorted(set(range(world)) - set(seen))
    if missing:
        raise ArgumentValueError(
            f"gather_states: {what} lack ranks {_shown(missing)} of a world of {world}: the "
            "process group holds fewer processes than the loaders' world_size. Pass the process "
            "group whose ranks are the loaders' ranks as group=, or build the loaders with its size."
        )
    return [seen[rank] for rank in range(world)]


def _world_of(state: Any, where: str) -> tuple[int, int]:
    """(world size, rank) of the loader that saved ``state``; (1, 0) for a loader not sharded
    by rank (its config says None)."""
    config = state.get("config") if isinstance(state, dict) else None
    if not isinstance(config, dict):
        raise ArgumentTypeError(
            f"{where}: `state` must be the dict DataLoader.state_dict() returned, with its "
            f"'config'; got {type(state).__name__}. Pass loader.state_dict()."
        )
    world, rank = config.get("world_size"), config.get("rank")
    if world is None and rank is None:
        return 1, 0
    if not (_is_int(world) and _is_int(rank) and 0 <= rank < world):
        raise ArgumentValueError(
            f"{where}: the state's config says rank {rank!r} of a world of {world!r}, not a rank "
            "in [0, world_size); it was edited or corrupted. Pass loader.state_dict() as it was."
        )
    return world, rank


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(items: list[Any]) -> str:
    """``items`` as a list, cut after a few."""
    return str(items) if len(items) <= _SHOWN else f"[{', '.join(map(str, items[:_SHOWN]))}, ...] ({len(items)})"


def _torch_distributed() -> Any:
    """``torch.distributed`` if the program imported and initialized it, else None."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


__all__ = ["gather_states", "load_rank_states", "save_rank_state"]
