"""Which process of a distributed job this is: the world size and rank every reader that shards
by rank reads the same way, and which positions of a cyclic list one rank takes."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._validate import check_non_negative_int, check_positive_int
from .errors import ArgumentValueError


def rank_positions(rank: int, world_size: int, per_rank: int, count: int) -> np.ndarray:
    """Positions rank, rank + world_size, ... (``per_rank`` of them) of a list of ``count``
    items repeated cyclically: one rank's share alone, so the work does not grow with the world."""
    positions = rank + world_size * np.arange(per_rank, dtype=np.int64)
    return positions % count if count else positions


# More ranks than any job runs: a larger world size is a mistake (a mangled variable), and
# refusing it keeps every plan over ranks small.
MAX_WORLD_SIZE = 2**24


def resolve_world(world_size: Any, rank: Any) -> tuple[int, int]:
    """Return (world_size, rank) from the arguments, else the environment, else (1, 0).

    Every reader that shards by rank uses it (the samplers, ``dataloader.columnar``'s streams),
    so all of them read the same arguments and variables the same way. A world of more than
    one process needs a rank: without one every process would read rank 0's shard.
    """
    if world_size is None and rank is not None:
        raise ArgumentValueError(
            f"`rank` was given ({rank!r}) without `world_size`; pass both, or neither to read "
            "WORLD_SIZE and RANK from the environment."
        )
    ws_name, rank_name = "world_size", "rank"
    if world_size is None:
        ws_name, world_size = "WORLD_SIZE", _env_int("WORLD_SIZE", 1)
    if rank is None:
        rank_name, rank = "RANK", _env_int("RANK", None)
    world_size = check_positive_int(ws_name, world_size)
    if world_size > MAX_WORLD_SIZE:
        raise ArgumentValueError(
            f"`{ws_name}` is {world_size}, more processes than a job runs (at most {MAX_WORLD_SIZE} "
            "here); check where it is set."
        )
    if rank is None:
        if world_size > 1:
            raise ArgumentValueError(
                f"`{ws_name}` is {world_size} but no rank is given: neither `rank` nor the RANK "
                "environment variable is set, and reading rank 0's shard in every process would "
                "repeat the same rows in each. Pass rank=..., or set RANK (torchrun sets both "
                "WORLD_SIZE and RANK; other launchers: export RANK from their own variable, such "
                "as SLURM_PROCID)."
            )
        rank = 0
    rank = check_non_negative_int(rank_name, rank)
    if rank >= world_size:
        raise ArgumentValueError(
            f"`{rank_name}` must be in [0, `{ws_name}`) = [0, {world_size}); got {rank}."
            + (" WORLD_SIZE is not set, so the world is this one process." if ws_name == "WORLD_SIZE"
               and "WORLD_SIZE" not in os.environ else "")
        )
    return world_size, rank


def _env_int(var: str, default: int | None) -> int | None:
    """Return the integer in environment variable ``var``, or ``default`` if unset or empty."""
    raw = os.environ.get(var, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ArgumentValueError(
            f"`{var}` (environment variable) must be an integer; got {raw!r}."
        ) from None
