"""DataLoader: validates options and assembles the pipeline. Nothing else."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Literal

from ._exec.pipeline import Pipeline
from ._framework_hint import hint_torch_framework
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

    Every argument is checked here, not at the first batch: a wrong type raises
    ``ArgumentTypeError`` (a ``TypeError``), a wrong value ``ArgumentValueError`` (a
    ``ValueError``), each naming the argument. docs/api/loader.md explains each option at length.

    Parameters
    ----------
    dataset
        A map-style dataset (``__getitem__`` and ``__len__``) or a stream (a ``StreamDataset``,
        or any object with ``__iter__``).
    sampler
        A batch sampler that yields lists of indices (a stream takes a ``StreamSampler``); it
        must match the dataset's kind. Default None: ``SequentialSampler(dataset)`` (batches of
        one) for a map dataset, ``StreamSampler(batch_size=1)`` for a stream, or the sampler that
        ``batch_size``, ``shuffle`` and ``drop_last`` build.
    transform
        Run on each sample where the batch is made: a ``Transform`` (its ``apply_batch`` is
        called once per batch) or a plain function of one sample. A ``BatchTransform`` at its
        end runs on the collated batch in your thread. Default None: the identity.
    collator
        Turns the list of samples into a batch: an object with ``apply(samples)`` or a plain
        function of the list. Default None: ``Collator()``. See also ``collate_fn``.
    num_workers
        0 (default): batches are made in your thread when you ask for them. An int ``N``:
        ``N`` workers (processes, or threads with ``worker_type="thread"``) start with each
        epoch and stop when it ends; at most what this machine's open-files limit and CPUs
        allow. ``"auto"``: workers are added and removed while the epoch runs, and the
        prefetch depth tuned with them unless ``prefetch_factor`` is an int.
    timeout
        Seconds each ``next()`` may wait for its batch before raising ``LoaderTimeoutError``
        (which names each busy worker, its batch and its stack); it also bounds each read of a
        stream in the main process. A number ``>= 0``, at most 2147483. Default 0 (and
        ``float("inf")``): wait forever. No effect with ``num_workers=0`` on a map dataset.
    preload
        Default False. True makes the next batch, and converts it for ``framework`` and
        ``device``, in a background thread while your loop works on the current one
        (``preload_depth`` batches ahead).
    parallel_stream
        For a stream only. Default False: the main process reads the stream, and workers
        transform and collate what it read. True: each worker reads its own ``iter(dataset)``
        (shard it with ``get_worker_info()``), and batches of different workers interleave.
        Ignored for a map dataset; an ``ArgumentValueError`` with a ``CallableSource``.
    prefetch_factor
        How many messages of tasks each worker may have outstanding; the epoch holds at most
        ``prefetch_factor * num_workers`` messages' worth in flight or ready. A message carries
        ``batches_per_message`` batches. Default None: 2 messages. A positive int ``n``: ``n``
        messages of one batch each unless ``batches_per_message`` is given (PyTorch's
        ``prefetch_factor`` exactly). ``"auto"``: tuned from batch times and memory room (what
        ``num_workers="auto"`` does when this is None); an ``ArgumentValueError`` with
        ``num_workers=0``. An int is ignored with ``num_workers=0``.
    batches_per_message
        Batches that travel in one message between a worker and the main process. Default
        None: one where ``prefetch_factor`` is an int, else sized from the batches measured so
        far (about 2 ms of a worker's work, at most 32 batches and 4 MiB). A positive int ``k``:
        always ``k`` (fewer at an epoch's end). Ignored with ``num_workers=0``.
    persistent_workers
        Default False: each epoch starts and stops its own workers. True: the workers start at
        the first ``iter(loader)`` and serve every epoch until ``close()`` or garbage
        collection; a newer ``iter(loader)`` ends an epoch still open on them. Needs
        ``num_workers >= 1``.
    multiprocessing_context
        How process workers start: a start method this platform offers (``"fork"``,
        ``"spawn"``, ``"forkserver"``) or a context from ``multiprocessing.get_context()``.
        Default None: Python's default. Under ``spawn`` and ``forkserver`` the dataset,
        transform, collator and ``worker_init_fn`` must pickle (checked before any worker
        starts).
    in_order
        Default True: batches come out in sampler order. False: each batch as soon as it is
        ready, so one slow batch does not hold back the others; the batches' contents are the
        same either way.
    seed
        An int in ``[0, 2**64)``: ``random``, ``numpy.random``, torch and ``batch_rng()`` are
        seeded for batch ``k`` of epoch ``e`` from ``(seed, e, k)``, so the batches are the same
        for any ``num_workers``; it also seeds the ``RandomSampler`` that ``shuffle=True``
        builds. Default None: a base seed is drawn per loader (from torch's generator where
        torch is imported, else NumPy's global one).
    worker_init_fn
        A callable ``(worker_id) -> None`` run once in each worker as it starts, after seeding
        and after its libraries' thread pools are capped at one thread. Its exception is raised
        at the next ``next()``. Default None.
    shm_budget
        Bytes of shared memory all workers together may keep for batches, split evenly: a cap,
        not a reservation (past it a worker sends batches through its pipe, with a warning). A
        positive int, at most what this machine's memory allows. Default None: up to 512 MiB per
        worker, less where memory is short.
    worker_type
        ``"process"`` or ``"thread"``: threads need no pickling and no shared memory and start
        at once; they help where transforms release the GIL, and run Python transforms in
        parallel on a free-threaded Python (3.14t). Default None: threads where the GIL is off
        (a free-threaded build, unless ``multiprocessing_context`` is given), processes
        elsewhere; a free-threaded Python whose GIL an extension module turned on gets
        processes and a ``GILWarning``.
    preload_depth
        Batches ``preload`` keeps ready: a positive int, default 1 (each costs a batch of
        device memory). Used with ``preload=True``.
    device
        Where batches go. Default None: the CPU. ``"cpu"``, a CUDA device (``"cuda:0"``, a
        ``torch.device``: implies ``framework="torch"``) or a MegEngine device (``"gpu0"``:
        implies ``framework="megengine"``); it must be usable when the loader is built.
    framework
        What batches are made of: ``"numpy"``, ``"torch"`` (tensors, zero-copy on the CPU) or
        ``"megengine"``. Default None: inferred from ``device``, NumPy without one. The
        framework is imported here; a failed import is an ``ArgumentValueError``.
    pin_memory
        Default False. True copies CPU tensors into page-locked memory (PyTorch with CUDA
        only; elsewhere it is ignored with a ``UserWarning``). A CUDA ``device`` pins anyway.
    epoch_size
        Default None: an epoch is one pass of the sampler or the stream. A positive int: every
        epoch is exactly that many batches and the source carries on across epochs, restarted
        when it runs out; this defines ``len(loader)`` for a stream.
    buffer_size
        Default 0: no buffer. ``N >= 1``: a background thread runs the pipeline up to ``N``
        batches ahead of your loop (before ``preload``, without device conversion).
    buffer_on_request
        Default False. True: the buffer works ahead only inside ``with loader.allow_buffering():``
        blocks. Needs ``buffer_size >= 1``.
    repeats
        Each batch is handed out this many times in a row, the same object (data echoing): a
        positive int, default 1. ``len(loader)`` counts the repeats.
    on_error
        What becomes of a sample whose fetch or transform fails, or that is None: ``"raise"``
        (default: its batch raises the error, and the iterator goes on with the next batch),
        ``"skip"`` (left out of its batch) or ``"replace"`` (another sample, drawn
        deterministically, takes its place). See docs/bad-samples.md.
    max_errors
        Failed samples allowed per epoch under ``"skip"`` and ``"replace"``: an int, or a float
        in ``[0, 1]`` (a fraction of the samples read); one more raises
        ``TooManyBadSamplesError``. Default None: 0.05, and no limit under ``"raise"``.
    error_log
        A file path: each failed sample is appended as a JSON line. Default None: the path in
        ``DATALOADER_ERROR_LOG`` when it is set, else no log.
    hooks
        ``StageHook`` objects (one, or a list) told before and after each fetch, transform and
        collate, and when one fails; they run where the stage runs (in each worker, with
        workers). Default: none.
    seeding
        How random state follows ``seed``. ``"batch"`` (default): as ``seed`` says, per batch,
        the same for any ``num_workers``. ``"worker"`` (PyTorch's scheme): each worker process
        seeds ``random``, ``numpy.random`` and torch once as it starts, from the epoch's workers
        seed plus its id (the loader's seed in the first epoch, a seed derived from it and the
        epoch in each later one), and leaves them to ``worker_init_fn`` and your code; with
        ``num_workers=0`` (and thread workers, which share them) your own generators are used
        and advanced. ``batch_rng()`` is seeded per batch either way.
    dispatch
        Which worker makes the next batch. ``"least_busy"`` (default): the one with the fewest
        batches outstanding. ``"round_robin"``: the workers in turn, whatever their load, so
        worker ``i`` of ``n`` makes batches ``i``, ``i + n``, ... (PyTorch's dispatch). The
        batches and their order are the same either way.
    too_many_workers
        What an int ``num_workers`` above what this machine has room for does (see
        ``num_workers``): ``"raise"`` (default) refuses it, ``"warn"`` warns and starts them
        (PyTorch's way).
    batch_size
        PyTorch's shortcut: without a ``sampler``, the batch size of the sampler built (default
        1). With a ``sampler``, any of the shortcuts is an ``ArgumentValueError``.
    shuffle
        PyTorch's shortcut: without a ``sampler``, True builds a ``RandomSampler`` seeded by
        ``seed`` (a new order each epoch), False or None a ``SequentialSampler``; True with a
        stream is an ``ArgumentValueError``.
    drop_last
        PyTorch's shortcut: without a ``sampler``, True drops the short last batch of the
        sampler built (default False).
    collate_fn
        PyTorch's name for ``collator``: the same option, so give one of the two.
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
        worker_type: str | None = None,
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
        seeding: Literal["batch", "worker"] = "batch",
        dispatch: Literal["least_busy", "round_robin"] = "least_busy",
        too_many_workers: Literal["raise", "warn"] = "raise",
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
            seeding=seeding,
            dispatch=dispatch,
            too_many_workers=too_many_workers,
        )
        hint_torch_framework(dataset, framework)
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
            self._is_stream(dataset),
        )

    dataset = property(lambda self: self._pipeline.spec.dataset, doc="The dataset, as given.")
    sampler = property(
        lambda self: self._pipeline.spec.sampler,
        doc="The sampler: the one given, the one the PyTorch shortcuts built, or the default one.",
    )
    transform = property(
        lambda self: self._transform,
        doc="The transform: the one given (a plain function wrapped in a Transform), or the identity.",
    )
    collator = property(
        lambda self: self._pipeline.spec.collator,
        doc="The collator: the one given as ``collator`` or ``collate_fn`` (a function wrapped), or ``Collator()``.",
    )
    num_workers = property(
        lambda self: self.options.num_workers, doc="``num_workers`` as given: an int, or ``\"auto\"``."
    )
    timeout = property(
        lambda self: self.options.timeout, doc="``timeout`` in seconds; 0 (also for ``float('inf')``) waits forever."
    )
    preload = property(lambda self: self.options.preload, doc="Whether batches are made ahead in a background thread.")
    parallel_stream = property(
        lambda self: self.options.parallel_stream, doc="Whether each worker reads its own copy of a stream."
    )
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

    def load_state_dict(
        self, state: dict[str, Any] | list[dict[str, Any]], *, skip_ahead: bool = False,
        allow_edited: bool = False, reweight: bool = False,
    ) -> None:
        """Make the next ``iter(loader)`` yield exactly the batches the saving run would have
        yielded after ``state`` was taken, then carry on with the following epochs as it would.

        The worker count, worker type, start method, ``prefetch_factor``, ``in_order`` and
        ``preload`` may differ from the saving loader's; the dataset, seed and the other settings
        that decide which batch is which may not (the error names the field).
        ``skip_ahead=True`` lets a stream without ``state_dict()``/``load_state_dict()`` (and a
        ``parallel_stream``) resume by re-reading the epoch and discarding what was handed out.
        A state changed after it was made (its digest no longer matches) is refused unless
        ``allow_edited=True``; its fields are checked either way. An epoch's iterator still open
        is ended (its next ``next()`` says so); the next ``iter(loader)`` resumes.

        Another number of ranks (docs/checkpointing.md): ``state`` may be the list of every
        rank's states, in rank order, or (for a map dataset) one rank's state; saved with another
        ``world_size``, rank or ``batch_size``, what no rank handed out of the epoch comes once
        over this world. ``reweight=True`` loads the state of a ``MixedStream`` saved under other
        weights or another schedule: each source goes on where it stood, under this mix's weights.
        """
        self._pipeline.load_state_dict(
            state, check_bool("skip_ahead", skip_ahead), check_bool("allow_edited", allow_edited),
            check_bool("reweight", reweight),
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
            state["dataset"], state["sampler"], self._transform, state["collator"], self.options,
            self._is_stream(state["dataset"]),
        )
        self._pipeline.epoch = state["epoch"]
        self._pipeline.spec = replace(self._pipeline.spec, base_seed=state.get("base_seed", self._pipeline.spec.base_seed))
        if state.get("resume") is not None:  # loaded and not yet run: the copy resumes there too
            self._pipeline.load_state_dict(*state["resume"])

    def _is_stream(self, dataset: Any) -> bool | None:
        """Whether ``dataset`` is read as a stream, where a subclass has its own rule (the
        PyTorch drop-in: PyTorch's); None lets the engine decide (see ``_stages/kinds.py``)."""
        return None

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

