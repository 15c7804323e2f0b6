"""A map-style dataset's source: one task per index list of the sampler."""

from __future__ import annotations

import copy
from typing import Any, Iterator

from .._reshard import handed_of
from .._validate import warn_argument
from ..errors import ArgumentValueError, ResumeWarning
from ..sampler import MapSampler
from ..sampler._reading import batches_from, sampler_state, yields_valid_indices
from .position import Resume
from .source import Source, fingerprint, index_list, known_length
from .task import BatchTask


class MapSource(Source):
    """A map-style dataset: one task per index list the sampler yields, read lazily.

    Resuming restores the sampler's state at the start of the epoch and skips the batches
    handed out without making them (:func:`~dataloader.sampler._reading.batches_from`).
    """

    notes_tokens = True  # one per epoch: the sampler's state as the epoch began
    holds_dataset_state = True

    def order_fields(self, dataset: Any, options: Any) -> dict[str, Any]:
        # Batch indices mean other samples in another length, or in other files of the same one.
        return {"length": len(dataset), "dataset": fingerprint(dataset, own_only=True)}

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        # epoch -> the sampler's state as it began, and the epoch's length then (a resumed
        # epoch on another world has its own; the sampler's len() moves on to the next one's).
        self._started: dict[int, tuple[Any, int | None]] = {}
        self._ours = yields_valid_indices(sampler)  # its batches need no copy

    def tasks(self, epoch: int, resume: Resume | None = None) -> Iterator[BatchTask]:
        start = 0
        if resume is not None:
            if "sampler" in resume.token:
                self.sampler.load_state_dict(resume.token["sampler"])
            start = resume.low
        # A copy: not a live object of the sampler's.
        self._started[epoch] = (copy.deepcopy(sampler_state(self.sampler)), known_length(self))
        # Our samplers' batches need no copy: int64 arrays (sent to workers as bytes, made
        # Python ints where the dataset is read, unchecked) or, through Infinite, new lists.
        ours = self._ours
        for index, indices in enumerate(batches_from(self.sampler, start, arrays=ours), start):
            if resume is None or index not in resume.above:
                yield BatchTask(epoch, index, indices=indices if ours else index_list(indices, index))

    def length(self) -> int | None:
        return len(self.sampler)

    def resume_point(self, epoch: int, index: int, begun: bool = True) -> dict:
        started, length = self._started.get(epoch, (None, None))
        if begun and epoch in self._started and (length is None or index < length):
            state = started
        else:  # an epoch not begun yet, or all of it handed out: the sampler as it left it
            state = sampler_state(self.sampler)
        return {} if state is None else {"sampler": state}

    def reshape(self, saved: list[dict], one_for_all: bool) -> Resume:
        tokens = [position["source"].get("sampler") for position in saved]
        if any(not isinstance(token, dict) for token in tokens) or not hasattr(self.sampler, "reshard_from"):
            raise ArgumentValueError(
                f"a {type(self.sampler).__name__} cannot resume on another number of ranks or batch "
                "size: only the samplers of this library (RandomSampler, SequentialSampler, "
                "ReplacementSampler, BucketSampler, Infinite over one of them, or a MapSampler "
                "subclass) say which indices each rank took. Resume on the world_size, rank and "
                "batch_size that saved the state."
            )
        if one_for_all and _layout(tokens[0]) == (self.sampler.world_size, self.sampler.batch_size):
            # Another rank's state of this very world (synchronous training: every rank at the
            # same step): this rank's own position there, as its own state would have said.
            mine = _as_rank(tokens[0], self.sampler.rank)
            self.sampler.load_state_dict(mine)
            position = saved[0]
            partial = tuple((int(e[0]), int(e[1]), -1) for e in position["partial"])
            return Resume(low=position["low"], count=position["count"], partial=partial, token={"sampler": mine})
        self.sampler.reshard_from(tokens, handed_of(saved))
        return Resume(token={"sampler": copy.deepcopy(sampler_state(self.sampler))})

    def forget_before(self, epoch: int, index: int) -> None:
        for begun in [key for key in self._started if key < epoch]:
            del self._started[begun]

    def check_resume(self, token: dict, skip_ahead: bool, epoch: int | None = None) -> None:
        if "sampler" in token:
            _check_sampler_epoch(self.sampler, token["sampler"], epoch)
            if not hasattr(self.sampler, "load_state_dict"):
                raise ArgumentValueError(
                    f"the state holds the sampler's own state, but this loader's "
                    f"{type(self.sampler).__name__} has no load_state_dict(). Resume with the sampler "
                    "that saved it."
                )
            self.sampler.load_state_dict(token["sampler"])  # now: a sampler that differs says so here
        else:
            warn_argument(
                f"{type(self.sampler).__name__} has no state_dict()/load_state_dict(): resuming "
                "iterates it afresh and skips the batches already handed out, which is exact only "
                "if its order depends on nothing but the epoch. Give it both methods to make the "
                "resume exact.",
                ResumeWarning,
            )


def _check_sampler_epoch(sampler: Any, saved: Any, epoch: int | None) -> None:
    """A map sampler of this library starts epoch ``epoch`` of the loader at its own epoch
    ``epoch``: a token that says otherwise would resume another epoch's order."""
    if epoch is None or not isinstance(saved, dict) or not isinstance(sampler, MapSampler):
        return
    if "epoch" in saved and saved["epoch"] != epoch:
        raise ArgumentValueError(
            f"the state's source.sampler.epoch is {saved['epoch']!r} but it resumes epoch {epoch}: the "
            "sampler's order would be another epoch's. Load the state as DataLoader.state_dict() "
            "returned it (it was changed), or build the loader afresh and call set_epoch()."
        )


def _layout(token: dict) -> tuple[Any, Any]:
    """The (world size, batch size) a sampler's state was saved with (an ``Infinite``'s: its
    wrapped sampler's)."""
    while isinstance(token.get("sampler"), dict):
        token = token["sampler"]
    return token.get("world_size"), token.get("batch_size")


def _as_rank(token: dict, rank: int) -> dict:
    """A copy of a sampler's state (an ``Infinite``'s: and its wrapped sampler's) as rank
    ``rank`` of the same world would have saved it at the same step."""
    mine = copy.deepcopy(token)
    inner = mine
    while isinstance(inner.get("sampler"), dict):
        inner = inner["sampler"]
    inner["rank"] = rank
    return mine
