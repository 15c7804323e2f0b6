"""DataLoader: validates options and assembles the pipeline. Nothing else."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Literal

from ._exec.pipeline import Pipeline
from ._options import LoaderOptions
from ._stages.kinds import sampler_from_shortcuts
from ._validate import check_bool, check_non_negative_int
from .collator import as_collator
from .errors import ArgumentValueError
from .monitor import Stats
from .transform._base import as_transform

if TYPE_CHECKING:
    from ._exec.iterator import LoaderIterator


class DataLoader:
    """Iterates batches of ``dataset`` drawn by ``sampler``.

    The positional arguments are MegEngine's. ``num_workers=0`` makes batches
    in the calling process; ``num_workers > 0`` in worker processes that hand
    them back through shared memory; ``num_workers="auto"`` in as many as keep the
    training loop fed, grown and shrunk while it runs (and the prefetch depth with them, unless
    ``prefetch_factor`` is an int): the batches and their order are those of any fixed count.
    ``loader.stats().tuning`` says what it chose and why (docs/autotune.md). Each
    ``iter(loader)`` is a new epoch.
    Keyword-only options use PyTorch's names where PyTorch has one.

    A sample whose fetch or transform fails raises its error by default (``on_error="raise"``),
    and the iterator goes on with the next batch if you catch it; ``on_error="skip"`` leaves the
    sample out of its batch and ``"replace"`` puts another in its place, both deterministically,
    up to ``max_errors`` per epoch (an int, or a fraction of the samples read; default 5%),
    logging each one to ``error_log`` (JSON lines; or ``DATALOADER_ERROR_LOG``). See
    docs/bad-samples.md. ``hooks`` are told of every fetch, transform and collate
    (:mod:`dataloader.hooks`).

    PyTorch's habits work too: without a ``sampler``, ``batch_size``,
    ``shuffle`` and ``drop_last`` build one (a ``RandomSampler`` seeded by
    ``seed`` when shuffling, else a ``SequentialSampler``; a ``StreamSampler``
    for a stream); ``transform`` and ``collator`` (alias ``collate_fn``) may
    be plain functions, of one sample and of the list of samples.
    """

    def __init__(
        self,
        dataset: Any,
        sampler: Any = None,
        transform: Any = None,
        collator: Any = None,
        num_workers: int | Literal["auto"] = 0,
        timeout: float = 0,
        preload: bool = False,
        parallel_stream: bool = False,
        *,
        prefetch_factor: int | Literal["auto"] | None = None,
        batches_per_message: int | None = None,
        persistent_workers: bool = False,
        multiprocessing_context: Any = None,
        in_order: bool = True,
        seed: int | None = None,
        worker_init_fn: Callable[[int], None] | None = None,
        shm_budget: int | None = None,
        worker_type: str = "process",
        preload_depth: int = 1,
        device: Any = None,
        framework: str | None = None,
        pin_memory: bool = False,
        epoch_size: int | None = None,
        buffer_size: int = 0,
        buffer_on_request: bool = False,
        repeats: int = 1,
        on_error: str = "raise",
        max_errors: int | float | None = None,
        error_log: str | None = None,
        hooks: Any = (),
        batch_size: int | None = None,
        shuffle: bool | None = None,
        drop_last: bool | None = None,
        collate_fn: Any = None,
    ) -> None:
        if collate_fn is not None and collator is not None:
            raise ArgumentValueError(
                "give `collator` or its PyTorch name `collate_fn`, not both; they are the same option."
            )
        self.options = LoaderOptions(
            num_workers=num_workers,
            timeout=timeout,
            preload=preload,
            parallel_stream=parallel_stream,
            prefetch_factor=prefetch_factor,
            batches_per_message=batches_per_message,
            persistent_workers=persistent_workers,
            multiprocessing_context=multiprocessing_context,
            in_order=in_order,
            seed=seed,
            worker_init_fn=worker_init_fn,
            shm_budget=shm_budget,
            worker_type=worker_type,
            preload_depth=preload_depth,
            device=device,
            framework=framework,
            pin_memory=pin_memory,
            epoch_size=epoch_size,
            buffer_size=buffer_size,
            buffer_on_request=buffer_on_request,
            repeats=repeats,
            on_error=on_error,
            max_errors=max_errors,
            error_log=error_log,
            hooks=hooks,
        )
        if (batch_size, shuffle, drop_last) != (None, None, None):
            sampler = sampler_from_shortcuts(
                dataset, sampler, batch_size, shuffle, drop_last, self.options.seed
            )
        self._transform = as_transform(transform)
        self._pipeline = Pipeline(
            dataset,
            sampler,
            self._transform,
            as_collator(collate_fn, "collate_fn") if collate_fn is not None else as_collator(collator),
            self.options,
        )

    dataset = property(lambda self: self._pipeline.spec.dataset)
    sampler = property(lambda self: self._pipeline.spec.sampler)
    transform = property(lambda self: self._transform)
    collator = property(lambda self: self._pipeline.spec.collator)
    num_workers = property(lambda self: self.options.num_workers)
    timeout = property(lambda self: self.options.timeout)
    preload = property(lambda self: self.options.preload)
    parallel_stream = property(lambda self: self.options.parallel_stream)
    batch_size = property(
        lambda self: getattr(self.sampler, "batch_size", None),
        doc="The sampler's batch size (None for a sampler without one), as PyTorch's loader has it.",
    )
    drop_last = property(
        lambda self: getattr(self.sampler, "drop_last", False),
        doc="Whether the sampler drops a last short batch (False for a stream's sampler).",
    )

    def __iter__(self) -> LoaderIterator:
        return self._pipeline.open_epoch()

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter(loader)`` epoch ``epoch`` (and the sampler's, if it has ``set_epoch``).

        Batch seeds derive from (seed, epoch, batch index): a resumed run that
        sets the epoch it stopped at gets the same augmentations it would have.
        """
        if not self._pipeline.set_epoch(check_non_negative_int("epoch", epoch)):
            return  # a loaded state resumes this epoch, and restores the sampler's own state
        set_sampler_epoch = getattr(self.sampler, "set_epoch", None)
        if set_sampler_epoch is not None:
            set_sampler_epoch(epoch)

    @property
    def epoch(self) -> int:
        """The epoch the next ``iter(loader)`` runs (after ``load_state_dict``: the state's)."""
        return self._pipeline.epoch

    def state_dict(self) -> dict[str, Any]:
        """Where the loader stands, as a small dict of plain values (JSON, ``torch.save``).

        Take it at any moment between batches: it records the batches handed out, not the
        ones made ahead (in the reorder buffer, a buffer, the preload queue), which a resumed
        run makes again. Taken after an epoch's last batch, it resumes at the next epoch's start.
        See docs/checkpointing.md.
        """
        return self._pipeline.state_dict()

    def load_state_dict(self, state: dict[str, Any], *, skip_ahead: bool = False, allow_edited: bool = False) -> None:
        """Make the next ``iter(loader)`` yield exactly the batches the saving run would have
        yielded after ``state`` was taken, then carry on with the following epochs as it would.

        The worker count, worker type, start method, ``prefetch_factor``, ``in_order`` and
        ``preload`` may differ from the saving loader's; the dataset, batch size, seed and the
        other settings that decide which batch is which may not (the error names the field).
        ``skip_ahead=True`` lets a stream without ``state_dict()``/``load_state_dict()`` (and a
        ``parallel_stream``) resume by re-reading the epoch and discarding what was handed out.
        A state changed after it was made (its digest no longer matches) is refused unless
        ``allow_edited=True``; its fields are checked either way. An epoch's iterator still open
        is ended (its next ``next()`` says so); the next ``iter(loader)`` resumes.
        """
        self._pipeline.load_state_dict(
            state, check_bool("skip_ahead", skip_ahead), check_bool("allow_edited", allow_edited)
        )

    def stats(self) -> Stats:
        """Timings of the latest epoch (see :class:`~dataloader.monitor.Stats`)."""
        return self._pipeline.stats()

    def close(self) -> None:
        """Stop persistent workers, if any, ending an epoch still open on them (its next
        ``next()`` says so). Iterators stop their own workers.

        A loader that is garbage collected needs no ``close()``: its pipeline closes itself once
        neither the loader nor an open epoch refers to it.
        """
        self._pipeline.close()

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the configuration only: the building blocks, the options and the epoch.

        Workers, shared memory and running iterators belong to this process; a copy (in
        another process, say) builds its own pipeline when it is unpickled and starts its
        workers when first iterated, at the epoch this loader would run next (where a state
        loaded and not yet run says, if there is one).
        """
        spec = self._pipeline.spec
        return {
            "dataset": spec.dataset,
            "sampler": spec.sampler,
            "transform": self._transform,
            "collator": spec.collator,
            "options": self.options,
            "epoch": self._pipeline.epoch,
            "resume": self._pipeline.pending_resume(),
            "base_seed": self._pipeline.spec.base_seed,  # an unseeded copy seeds batches alike
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.options = state["options"]
        self._transform = state["transform"]
        self._pipeline = Pipeline(
            state["dataset"], state["sampler"], self._transform, state["collator"], self.options
        )
        self._pipeline.epoch = state["epoch"]
        self._pipeline.spec = replace(self._pipeline.spec, base_seed=state.get("base_seed", self._pipeline.spec.base_seed))
        if state.get("resume") is not None:  # loaded and not yet run: the copy resumes there too
            self._pipeline.load_state_dict(*state["resume"])

    def __len__(self) -> int:
        length = self._pipeline.length()
        if length is None:
            raise TypeError(
                "len() of a DataLoader over a StreamDataset is undefined: a stream's length "
                "is unknown. Count batches while iterating, set epoch_size, or use a map-style Dataset."
            )
        return length

    def allow_buffering(self) -> Any:
        """Let the current epoch's buffer work ahead inside the block (``buffer_on_request=True``)."""
        iterator = self._pipeline.current_iterator()
        if iterator is None:
            raise RuntimeError("allow_buffering() needs a running epoch: call iter(loader) first.")
        return iterator.allow_buffering()

