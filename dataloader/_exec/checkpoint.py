"""A loader's state as plain values: its format, the configuration it fits, and the position.

``DataLoader.state_dict()`` builds it here from the open epoch's
:class:`~dataloader._stages.position.Position` (or the next epoch's start) and
``load_state_dict()`` checks it here, field by field, before anything runs.
"""

from __future__ import annotations

import copy
from typing import Any

from .._stages.position import Resume
from .._stages.source import Source
from ..errors import ArgumentTypeError, ArgumentValueError

FORMAT = "dataloader.state/1"

# Why a field must match, added to the error that names it.
_WHY = {
    "source": "the state of one kind of dataset or reader cannot place another",
    "length": "batch indices mean other samples in a dataset of another length",
    "batch_size": "batch indices count batches of the saved size",
    "drop_last": "the number of batches per epoch depends on it",
    "seed": "the seed fixes the order and every random transform",
    "repeats": "positions count echoed batches",
    "epoch_size": "positions count batches of fixed-size epochs",
    "world_size": "each rank's share of the data depends on it",
    "rank": "each rank's share of the data depends on it",
    "stream_workers": "with parallel_stream=True each worker's shard depends on the worker count",
}


def loader_config(spec: Any, source: Source) -> dict[str, Any]:
    """What a state fits: the settings that decide which batch is which."""
    sampler, dataset, options = spec.sampler, spec.dataset, spec.options
    world = sampler if hasattr(sampler, "world_size") else dataset
    own = source.order_fields(dataset, options)
    return {
        "source": type(source.reader).__name__,
        "length": own.get("length"),
        "batch_size": getattr(sampler, "batch_size", None),
        "drop_last": getattr(sampler, "drop_last", None),
        "seed": options.seed,
        "repeats": options.repeats,
        "epoch_size": options.epoch_size,
        "world_size": getattr(world, "world_size", None),
        "rank": getattr(world, "rank", None),
        "stream_workers": own.get("stream_workers"),
    }


def fresh_position(epoch: int, source: Source) -> dict[str, Any]:
    """The position of an epoch not begun yet."""
    return {
        "epoch": epoch,
        "low": 0,
        "above": [],
        "partial": [],
        "count": 0,
        "workers": {},
        "source": source.resume_point(epoch, 0, begun=False),
    }


def make_state(position: dict[str, Any], spec: Any, source: Source) -> dict[str, Any]:
    """The whole state: the format, the position, the configuration, a map dataset's own state."""
    state = {"format": FORMAT, **position, "config": loader_config(spec, source)}
    dataset_state = getattr(spec.dataset, "state_dict", None)
    if dataset_state is not None and source.reader.holds_dataset_state:
        state["dataset"] = dataset_state()
    return state


def read_state(state: Any, spec: Any, source: Source, skip_ahead: bool) -> Resume:
    """Check ``state`` against this loader and return where it resumes; a clear error for a
    state of another format or configuration, or one the source cannot restore."""
    if not isinstance(state, dict):
        raise ArgumentTypeError(
            f"`state` must be the dict DataLoader.state_dict() returned; got {type(state).__name__}."
        )
    if state.get("format") != FORMAT:
        raise ArgumentValueError(
            f"`state` has format {state.get('format')!r}; this loader reads {FORMAT!r}. Pass the "
            "dict DataLoader.state_dict() returned (as saved, e.g. by torch.save or json.dumps)."
        )
    mine = loader_config(spec, source)
    saved = state.get("config", {})
    for name, value in mine.items():
        if saved.get(name) != value:
            raise ArgumentValueError(
                f"the state was saved by a loader with {name}={saved.get(name)!r}; this loader has "
                f"{name}={value!r} ({_WHY[name]}). Build the loader as the one that saved the "
                "state, or start it afresh without load_state_dict()."
            )
    by_worker = source.resumes_by_worker
    if by_worker:  # task numbers mean nothing here: counts (and order) per worker do
        state = {**state, "low": 0, "above": []}
    resume = Resume(
        low=int(state["low"]),
        above=frozenset(int(index) for index in state["above"]),
        partial=tuple((int(key), int(done), int(worker)) for key, done, worker in state["partial"]),
        partial_by_worker=by_worker,
        count=int(state["count"]),
        workers={int(worker): int(n) for worker, n in state["workers"].items()},
        token=copy.deepcopy(state["source"]),
        skip_ahead=skip_ahead,
    )
    source.check_resume(resume.token, skip_ahead)
    return resume
