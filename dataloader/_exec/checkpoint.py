"""A loader's state as plain values: its format, the configuration it fits, and the position.

``DataLoader.state_dict()`` builds it here from the open epoch's
:class:`~dataloader._stages.position.Position` (or the next epoch's start) and
``load_state_dict()`` checks it here, field by field, before anything runs.
"""

from __future__ import annotations

import copy
import fnmatch
from typing import Any

from .._digest import digest, first_difference
from .._stages.position import Resume
from .._stages.source import Source, known_length
from ..errors import ArgumentTypeError, ArgumentValueError
from .state_fields import checked_position, field_int

# 3: the fingerprints of columnar sources hold their files' sizes and stamps (``stamps``), so a
# state refuses files rewritten in the same layout; a state/2 cannot say which files it read.
FORMAT = "dataloader.state/3"
_OLDER = ("dataloader.state/1", "dataloader.state/2")

# Why a field must match, added to the error that names it.
_WHY = {
    "source": "the state of one kind of dataset or reader cannot place another",
    "length": "batch indices mean other samples in a dataset of another length",
    "dataset": "batch indices mean other rows in other files",
    "stream": "the stream would read other rows, or the same rows in another order",
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
    own = copy.deepcopy(source.order_fields(dataset, options))  # a state's, not the dataset's
    return {
        "source": type(source.reader).__name__,
        "length": own.get("length"),
        "dataset": own.get("dataset"),
        "stream": own.get("stream"),
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
        "last_worker": -1,
        "source": source.resume_point(epoch, 0, begun=False),
    }


def resumed_position(epoch: int, resume: Resume) -> dict[str, Any]:
    """The position a loaded ``resume`` stands at, as a state holds it (before any batch)."""
    return {
        "epoch": epoch,
        "low": resume.low,
        "above": sorted(resume.above),
        "partial": [list(entry) for entry in resume.partial],
        "count": resume.count,
        "workers": {str(worker): n for worker, n in sorted(resume.workers.items())},
        "last_worker": resume.last_worker,
        "source": copy.deepcopy(resume.token),
    }


def make_state(position: dict[str, Any], spec: Any, source: Source) -> dict[str, Any]:
    """The whole state: the format, the position, the configuration, a map dataset's own state,
    the seed drawn for an unseeded loader, and a digest of it all."""
    state = {"format": FORMAT, **position, "config": loader_config(spec, source)}
    state["source"] = copy.deepcopy(state["source"])  # the source's own record stays its own
    if spec.options.seed is None:  # batches are seeded from a drawn seed: a resume needs it
        state["base_seed"] = spec.base_seed
    dataset_state = getattr(spec.dataset, "state_dict", None)
    if dataset_state is not None and source.reader.holds_dataset_state:
        state["dataset"] = copy.deepcopy(dataset_state())
    state["digest"] = digest(state)
    return state


def read_state(
    state: Any, spec: Any, source: Source, skip_ahead: bool, allow_edited: bool = False, reweight: bool = False
) -> Resume:
    """Check ``state`` against this loader and return where it resumes; a clear error for a
    state of another format or configuration, an edited or corrupted one, or one the source
    cannot restore. ``reweight``: a mix's weights may differ (the stream's own check is told)."""
    check_format(state, allow_edited)
    _check_config(state.get("config"), loader_config(spec, source), _relaxed(reweight, world=False))
    epoch = field_int(state, "epoch")
    fields = checked_position(state, source, known_length(source), spec.options.repeats)
    by_worker = source.resumes_by_worker
    if by_worker:  # task numbers mean nothing here: counts (and order) per worker do
        fields.update(low=0, above=[])
    resume = Resume(
        low=fields["low"],
        above=frozenset(fields["above"]),
        partial=tuple(fields["partial"]),
        partial_by_worker=by_worker,
        count=fields["count"],
        workers=fields["workers"],
        last_worker=fields["last_worker"],
        token=copy.deepcopy(state["source"]),
        skip_ahead=skip_ahead,
    )
    source.check_resume(resume.token, skip_ahead, epoch)
    return resume


def check_format(state: Any, allow_edited: bool) -> None:
    """Refuse what is not a loader state of this format, or one changed since it was made."""
    if not isinstance(state, dict):
        raise ArgumentTypeError(
            f"`state` must be the dict DataLoader.state_dict() returned (or the list of every rank's); "
            f"got {type(state).__name__}."
        )
    if state.get("format") != FORMAT:
        older = (
            " (a state of an older version of dataloader: resume at an epoch boundary instead, with set_epoch())"
            if state.get("format") in _OLDER
            else ""
        )
        raise ArgumentValueError(
            f"`state` has format {state.get('format')!r}; this loader reads {FORMAT!r}{older}. Pass the "
            "dict DataLoader.state_dict() returned (as saved, e.g. by torch.save or json.dumps)."
        )
    if not allow_edited:
        _check_digest(state)


def check_config(saved: Any, mine: dict[str, Any], reweight: bool, world: bool) -> None:
    """:func:`_check_config` against this loader's configuration ``mine`` (:func:`loader_config`);
    ``world``: the world size, rank and batch size may differ (a resume on another number of ranks)."""
    _check_config(saved, mine, _relaxed(reweight, world))


# Where a configuration may differ: a mix's weights with reweight=True; the world (the loader's,
# and every stream's own) and the batch size on a resume on another number of ranks.
_REWEIGHT = ("stream.weights", "stream.schedule")
_WORLD = ("world_size", "rank", "batch_size", "stream.world_size", "stream.rank", "stream.*.world_size", "stream.*.rank")


def _relaxed(reweight: bool, world: bool) -> tuple[str, ...]:
    return (_REWEIGHT if reweight else ()) + (_WORLD if world else ())


def saved_base_seed(state: dict, spec: Any) -> int | None:
    """The seed an unseeded loader drew for its batches, from ``state`` (checked by
    :func:`read_state`); None when the loader has a seed of its own."""
    if spec.options.seed is not None:
        return None
    return field_int(state, "base_seed", 0, 2**64 - 1)


def _check_digest(state: dict) -> None:
    """Refuse a state whose contents no longer match the digest made with them."""
    body = {key: value for key, value in state.items() if key != "digest"}
    if state.get("digest") != digest(body):
        raise ArgumentValueError(
            "the state's digest does not match its contents: it was changed after "
            "DataLoader.state_dict() made it (edited by hand, or corrupted in storage). Load the "
            "state as saved; to load an edited state on purpose, pass "
            "load_state_dict(state, allow_edited=True) (its fields are still checked)."
        )


def _check_config(saved: Any, mine: dict[str, Any], relaxed: tuple[str, ...] = ()) -> None:
    """Every setting that decides which batch is which must match; the error names the field
    (a dataset's or stream's own field as ``stream.seed``, say). Fields matching a pattern of
    ``relaxed`` (``stream.*.rank``: a ``rank`` one level down) may differ."""
    if not isinstance(saved, dict):
        raise ArgumentTypeError(f"the state's config must be a dict; got {type(saved).__name__}.")
    for name, value in mine.items():
        differing = first_difference(name, _without(saved.get(name), name, relaxed), _without(value, name, relaxed))
        if differing is None:
            continue
        field, theirs, value = differing
        raise ArgumentValueError(
            f"the state was saved by a loader with {field}={theirs!r}; this loader has "
            f"{field}={value!r} ({_WHY[name]}). Build the loader as the one that saved the "
            "state, or start it afresh without load_state_dict()."
        )


def without_ranks(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` less the rank (the loader's, and every stream's own): what every rank's state
    of one run shares."""
    relaxed = ("rank", "stream.rank", "stream.*.rank")
    return {name: _without(value, name, relaxed) for name, value in config.items()}


def _without(value: Any, path: str, relaxed: tuple[str, ...]) -> Any:
    """``value`` (the config field at ``path``) less what ``relaxed`` lets differ, at any depth."""
    if any(fnmatch.fnmatchcase(path, pattern) for pattern in relaxed):
        return None
    if isinstance(value, dict):
        return {key: _without(item, f"{path}.{key}", relaxed) for key, item in value.items()}
    return value
