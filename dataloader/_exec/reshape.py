"""States of another world: every rank's loader states (or one rank's) read into where this
loader, of another world size, rank or batch size, resumes (docs/checkpointing.md).

A list of states from this loader's own world and batch size is simply this rank's state, so
the resume is the exact one of the same world; otherwise the source reshapes the epoch
(:meth:`~dataloader._stages.source.Source.reshape`): what no old rank handed out comes once.
"""

from __future__ import annotations

import inspect
from typing import Any

from .._stages.position import Resume
from .._stages.source import Source
from ..errors import ArgumentTypeError, ArgumentValueError
from .checkpoint import check_config, check_format, loader_config, read_state, without_ranks
from .state_fields import checked_position, field_int


def read_states(
    states: Any, spec: Any, source: Source, skip_ahead: bool, allow_edited: bool, reweight: bool
) -> tuple[Resume, dict, bool]:
    """Where this loader resumes from ``states`` (one state, or every rank's in rank order), the
    state that speaks for them (its epoch, the dataset's state, the drawn seed), and whether the
    epoch was reshaped for this world."""
    if reweight:
        _check_reweights(source)
    many = isinstance(states, (list, tuple))
    group = _checked_group(list(states), allow_edited) if many else [states]
    check_format(group[0], allow_edited)
    config = group[0].get("config")
    if not isinstance(config, dict):
        raise ArgumentTypeError(f"the state's config must be a dict; got {type(config).__name__}.")
    config_here = loader_config(spec, source)
    mine = (config_here["world_size"], config_here["rank"], config_here["batch_size"])
    theirs = (config.get("world_size"), config.get("rank"), config.get("batch_size"))
    if many and (theirs[0], theirs[2]) == (mine[0], mine[2]):
        group, many = [group[mine[1]]], False  # this rank's own state: the exact same-world resume
        theirs = mine
    if not many and theirs == mine:
        return read_state(group[0], spec, source, skip_ahead, allow_edited, reweight), group[0], False
    if not isinstance(theirs[0], int) or theirs[0] < 1:
        raise ArgumentValueError(
            f"the state's config.world_size is {theirs[0]!r}; a resume on another number of ranks "
            "needs the world the state was saved in. Load the state as DataLoader.state_dict() returned it."
        )
    for state in group:
        check_config(state.get("config"), config_here, reweight, world=True)
    positions = [_position(state, source, spec) for state in group]
    one_for_all = len(group) == 1 and theirs[0] > 1
    if one_for_all and group[0]["above"]:
        raise ArgumentValueError(
            "one rank's state with batches handed out out of order (in_order=False) cannot speak for "
            "the other ranks, which finished other batches. Pass the list of every rank's state, in "
            "rank order (docs/checkpointing.md)."
        )
    return source.reshape(positions, one_for_all), group[0], True


def _checked_group(states: list, allow_edited: bool) -> list[dict]:
    """Every rank's state of one world, in rank order, of one epoch, alike but for the rank."""
    if not states:
        raise ArgumentValueError("`state` is an empty list: pass every rank's DataLoader state, in rank order.")
    for state in states:
        check_format(state, allow_edited)
    first = states[0].get("config") or {}
    world = first.get("world_size")
    shared = without_ranks(first)
    if world != len(states):
        raise ArgumentValueError(
            f"the list holds {len(states)} states, but they were saved in a world of {world!r} ranks: "
            "pass every rank's state, one per rank, in rank order."
        )
    for rank, state in enumerate(states):
        config = state.get("config") or {}
        if config.get("rank") != rank or config.get("world_size") != world:
            raise ArgumentValueError(
                f"entry {rank} of the list is rank {config.get('rank')!r}'s state of a world of "
                f"{config.get('world_size')!r}: pass every rank's state of one world, in rank order "
                "(gather_states and load_rank_states return them so)."
            )
        if without_ranks(config) != shared or state.get("epoch") != states[0].get("epoch"):
            raise ArgumentValueError(
                f"rank {rank}'s state was saved by a loader configured otherwise than rank 0's, or in "
                f"another epoch ({state.get('epoch')!r}, rank 0: {states[0].get('epoch')!r}): pass the "
                "states every rank took at the same step of one run."
            )
    return states


def _position(state: dict, source: Source, spec: Any) -> dict:
    """A rank's position, checked (its epoch's length was its world's: not bounded here)."""
    field_int(state, "epoch")
    fields = checked_position(state, source, None, spec.options.repeats)
    partial = [list(entry) for entry in fields["partial"]]
    return {**fields, "partial": partial, "source": state["source"]}


def _check_reweights(source: Source) -> None:
    """``reweight=True`` needs a stream read by the main process whose ``load_state_dict`` takes it."""
    dataset = getattr(source.reader, "dataset", None)
    load = getattr(dataset, "load_state_dict", None)
    try:
        takes = load is not None and "reweight" in inspect.signature(load).parameters
    except (TypeError, ValueError):
        takes = False
    if not takes or source.reader.resumes_by_worker:
        raise ArgumentValueError(
            f"reweight=True loads a state of a mix saved under other weights, but this loader reads "
            f"{type(dataset if dataset is not None else source.reader).__name__}, whose "
            "load_state_dict() takes no reweight (a MixedStream's does; with parallel_stream=False). "
            "Drop reweight=True."
        )
