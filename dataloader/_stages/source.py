"""Sources: where an epoch's tasks come from. With :mod:`.kinds` (which tells a dataset's
kind and checks its sampler), the only module that knows dataset kinds.

Every source offers the same small interface (:class:`Source`): the tasks of
an epoch, their number, the consumer-side stage it needs, ``close()``, and
what a resume needs (a token per batch, see :mod:`.position`). :func:`build_source` picks one
from the dataset and the loader's options; executors receive tasks and never ask what is
behind them.

==========================  =================================================
``MapSource``               a map dataset: one task per index list of the sampler
``StreamSource``            a stream read by the main process, cut into batches
``WorkerStreamSource``      a stream each worker reads itself (``parallel_stream``)
``CallableTasks``           a :class:`~dataloader.CallableSource`'s batches or jobs
``FixedEpochs``             wraps any of them: ``epoch_size`` batches per epoch,
                            carrying on where the previous epoch stopped
==========================  =================================================

This module holds the contract and what the kinds share; each kind has a module of its own
(:mod:`.map_source`, :mod:`.stream_sources`, :mod:`.fixed_epochs`) and :mod:`.build` picks one.
A new kind of source is one more class and one more branch in :func:`~.build.build_source`;
nothing else changes.
"""

from __future__ import annotations

import copy
from typing import Any, Iterator

from .._digest import qualified_name
from ..errors import ArgumentTypeError, ArgumentValueError
from .position import Resume
from .task import BatchTask


class Source:
    """The contract between a dataset kind and the pipeline.

    ``worker_batch_size`` is set when each worker reads its own stream (the
    pool hands it to the workers, and the tasks carry no payload);
    ``worker_restart`` when those streams carry on across epochs, so the
    workers must too. ``reads_stream_here`` when making a task reads the
    stream in this process (the monitor times it as the ``read`` stage).

    Resuming (:mod:`~dataloader._stages.position`): ``tasks(epoch, resume)`` starts where a
    saved state left off; :meth:`resume_point` is the token that restarts the epoch's tasks at
    a batch, and :meth:`check_resume` refuses, before any work, a token this source cannot use.
    A source also says what a state must match to fit it (:meth:`order_fields`), whether a
    state counts batches per worker (``resumes_by_worker``) and whether it carries the
    dataset's own state (``holds_dataset_state``): the checkpoint code asks, and never looks
    at a source's class.
    """

    worker_batch_size: int | None = None
    worker_restart: bool = False
    # Workers reading their own shards: how many there are (they cannot change mid-run).
    stream_workers: int | None = None
    reads_stream_here: bool = False
    notes_tokens = False  # True: it keeps a token per batch, pruned by forget_before()
    # A state's task numbers mean nothing: each worker's count of batches says where it stands.
    resumes_by_worker = False
    # The dataset's state_dict() goes into the loader's state (a map dataset's).
    holds_dataset_state = False
    # Each batch is one task (no batch split into chunks): batches handed out = tasks done.
    tasks_are_batches = True
    # A loaded state of a mix with other weights: the stream is told to take it (reweight=True).
    reweight = False

    @property
    def reader(self) -> "Source":
        """The source that reads the dataset (a source that wraps another names that one)."""
        return self

    def order_fields(self, dataset: Any, options: Any) -> dict[str, Any]:
        """Settings of this source, besides the loader's, that decide which batch is which:
        a saved state fits only a source with the same values."""
        return {}

    def tasks(self, epoch: int, resume: Resume | None = None) -> Iterator[BatchTask]:
        """The tasks of ``epoch``, numbered from 0 (from ``resume.low`` when resuming, leaving
        out the ones ``resume`` says were handed out); closing the iterator frees what it opened."""
        raise NotImplementedError

    def length(self) -> int | None:
        """Batches in one epoch, or None when only reading tells (a stream)."""
        return None

    def consumer_stages(self, upstream: Any, collator: Any, policy: Any = None) -> Any:
        """Wrap the executor in the stages this source's batches need before hand-out
        (``policy``: the loader's :class:`~dataloader._stages.bad_samples.ErrorPolicy`)."""
        return upstream

    def close(self) -> None:
        """Release what lives across epochs (an open stream); idempotent."""

    def resume_point(self, epoch: int, index: int, begun: bool = True) -> dict:
        """Plain values that let ``tasks(epoch, resume)`` start at batch ``index`` (which the
        epoch has made, or will make next). ``begun=False``: the epoch has not started yet."""
        return {}

    def forget_before(self, epoch: int, index: int) -> None:
        """Batches before ``index`` of ``epoch`` were handed out: tokens noted for them can go."""

    def check_resume(self, token: dict, skip_ahead: bool, epoch: int | None = None) -> None:
        """Raise a clear error, before any work, when ``token`` cannot restart this source
        (``epoch``: the epoch the state resumes, where the token must agree with it)."""

    def reshape(self, saved: list[dict], one_for_all: bool) -> Resume:
        """Where this loader (of another world size, rank or batch size than the one that saved
        them) resumes the epoch of ``saved``: every rank's checked position with its source token,
        in rank order, or one standing for every rank (``one_for_all``). What no old rank handed
        out comes once over this world (docs/checkpointing.md); a source that cannot say so refuses."""
        raise ArgumentValueError(self.reshape_refused)

    reshape_refused = (
        "this kind of dataset cannot resume on another number of ranks: resume on the world_size, "
        "rank and batch_size that saved the state."
    )

    def rewind(self, token: dict) -> None:
        """An epoch was left early at ``token`` (its first batch not handed out): a source whose
        next epoch carries on from this one starts it there, so batches read ahead and never
        handed out are not lost."""


def fingerprint(dataset: Any, own_only: bool = False) -> Any:
    """What decides the order of ``dataset``'s samples, as plain values: its own
    ``order_fingerprint()`` (files, seed, shuffle, sharding...), else its class (None with
    ``own_only``: a map dataset's length says enough)."""
    own = getattr(dataset, "order_fingerprint", None)
    if own is not None:
        return own()
    if own_only:
        return None
    return {"type": qualified_name(dataset)}


def copying(state_dict: Any) -> Any:
    """``state_dict`` made to return a copy: a stream may hand out the object it keeps
    updating, and a position noted for later must not move with it."""
    if state_dict is None:
        return None
    return lambda: copy.deepcopy(state_dict())


def known_length(source: Source) -> int | None:
    """``source.length()``, or None where it is unknown or raises (a sampler's ``len()`` that
    raises is left alone until a length is needed, and a position never needs one)."""
    try:
        return source.length()
    except Exception:
        return None


def index_list(indices: Any, index: int) -> list:
    """Batch ``index`` of a map sampler as a list; a sampler that yields single indices (not
    lists of them) is told so here, not by a bare ``TypeError`` from deep in the loader."""
    try:
        return list(indices)
    except TypeError:
        raise ArgumentTypeError(
            f"`sampler` must yield lists of indices (it is a batch sampler); its batch {index} "
            f"is {type(indices).__name__} {indices!r}. Wrap a sampler of single indices so that "
            "it yields lists, or use SequentialSampler/RandomSampler(dataset, batch_size=...)."
        ) from None
