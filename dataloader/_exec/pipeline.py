"""The pipeline of one DataLoader: source -> executor -> consumer stages, epoch after epoch.

```
serial:    source.tasks -> SerialExecutor ------------------------------\\
parallel:  source.tasks -> ParallelExecutor(process or thread pool) -----+-> [source's stage] -> [Buffered]
           -> [Preload | convert] -> [batch transforms] -> [Echo] -> LoaderIterator
```

:class:`Pipeline` owns what lives across epochs (the source, persistent
workers, the epoch counter, the latest epoch's timings); each
:meth:`Pipeline.open_epoch` assembles a fresh chain over them. An epoch's
executor keeps the pipeline alive, so a loader dropped mid-epoch stops its
workers when that epoch ends, not under it. Epochs that share persistent
workers or a fixed-size feed run one at a time: a newer one ends the open one.
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import replace
from typing import Any

from .._device.adapters import resolve_adapter
from .._device.preload import Preload
from .._options import LoaderOptions
from .._stages.batch import BatchMaker
from .._stages.buffering import Buffered
from .._stages.consumer import Echo, MapBatches
from .._stages.position import Position, Resume, Tally
from .._stages.kinds import checked_sampler
from .._stages.build import build_source
from .._stages.source import known_length
from .._stages.streams import timed_reads
from .._validate import warn_argument
from ..errors import ArgumentValueError, ResumeWarning
from .._failure_book import FailureBook
from .._tune.tuner import Autotuner
from ..monitor import MonitorSettings, Recorder, Stats
from ..rng import draw_seed
from .._stages.seeding import workers_seed
from ..transform._base import split_batch_transforms
from .checkpoint import fresh_position, make_state, resumed_position, saved_base_seed
from .iterator import LoaderIterator
from .parallel import ParallelExecutor
from .pool_start import built_on, start_pool
from .reshape import read_states
from .serial import SerialExecutor
from .spec import PipelineSpec


class Pipeline:
    """Turns a loader's building blocks into one iterator per epoch.

    ``transform`` and ``collator`` are already checked; ``sampler`` may be
    None (the dataset kind's default). ``stream`` says the dataset's kind where the loader has
    its own rule; None: :func:`~dataloader._stages.kinds.is_stream` decides.
    """

    def __init__(
        self, dataset: Any, sampler: Any, transform: Any, collator: Any, options: LoaderOptions,
        stream: bool | None = None,
    ) -> None:
        sampler = checked_sampler(dataset, sampler, stream)
        sample_transform, batch_transforms = split_batch_transforms(transform)
        self.spec = PipelineSpec(
            dataset=dataset,
            sampler=sampler,
            transform=sample_transform,
            collator=collator,
            options=options,
            base_seed=options.seed if options.seed is not None else draw_seed(),
            adapter=resolve_adapter(options.device, options.framework, options.pin_memory),
            batch_transforms=batch_transforms,
        )
        self.source = build_source(dataset, sampler, options, stream)
        # num_workers="auto" or prefetch_factor="auto": the settings carry over from epoch to epoch.
        self._tuner = _autotuner(options, self.source) if options.tune_workers or options.tune_depth else None
        self.epoch = 0
        self._pool: Any = None  # persistent workers, when they outlive an epoch
        self._last_iterator: Any = None
        self._open: weakref.WeakSet[LoaderIterator] = weakref.WeakSet()  # epochs not closed yet
        self._last_recorder: Recorder | None = None  # outlives its iterator: stats() after the epoch
        self._resume: Resume | None = None  # where the next epoch starts, from load_state_dict()
        self._resume_state: dict | None = None  # the state it came from, for state_dict() until then
        self._allow_edited = False  # how it was loaded (a pickled copy loads it the same way)
        # Where the latest epoch stood when it was closed before its end (a break, an error).
        self._left_early: dict | None = None
        # seeding="worker": the base seed of the next workers, where the loader draws one (the
        # PyTorch drop-in, once per iter() as PyTorch does); None: from the seed and the epoch.
        self.drawn_workers_seed: int | None = None

    def open_epoch(self) -> LoaderIterator:
        """The iterator of the next epoch (ending the open one, if they would share workers or a feed)."""
        epoch = self.epoch
        self._end_open_epoch("superseded", epoch)  # first: where a shared feed was left is noted
        self.epoch = epoch + 1
        resume, self._resume, self._resume_state = self._resume, None, None
        left, self._left_early = self._left_early, None
        if resume is None and left is not None and not (left["above"] or left["partial"]):
            self.source.rewind(left["source"])  # a feed that outlives epochs: not past what was read ahead
        options = self.spec.options
        settings = MonitorSettings.from_env()
        settings.make_visible()
        book = FailureBook(options.error_limit, options.error_log_path())
        recorder = Recorder(self._worker_count(), settings, options.worker_type, book=book)
        # Nothing reads ahead or echoes after the Tally, and batches come by task index with no
        # worker counts to keep: the position only counts (see Position).
        counting = (
            not (options.buffer_size or options.preload or options.repeats > 1)
            and options.in_order and self.source.worker_batch_size is None
        )
        position = Position(self.source, epoch, options.repeats, known_length(self.source), resume, counting)
        executor = self._executor(epoch, recorder, resume)
        stages, buffer = self._consumer_stages(executor, recorder, position)
        length = self.length() if resume is None else position.remaining()
        workers = getattr(executor, "worker_processes", None)
        iterator = LoaderIterator(stages, length, position, recorder, buffer, epoch, _closed_watch(self), workers)
        self._last_iterator = weakref.ref(iterator)
        self._open.add(iterator)
        self._last_recorder = recorder
        return iterator

    def state_dict(self) -> dict:
        """Where the loader stands: the open epoch's position, else the next epoch's start."""
        if self._resume_state is not None:  # restored, and no batch since: the state as loaded
            return copy.deepcopy(self._resume_state)
        current = self.current_iterator()
        if current is not None and not current.closed:
            _warn_older_open(current, self._open)
            position = current.position.snapshot()
        elif self._left_early is not None:  # a break: the rest of that epoch is what resumes
            position = self._left_early
        else:
            position = fresh_position(self.epoch, self.source)
        return make_state(position, self.spec, self.source)

    def epoch_closed(self, iterator: LoaderIterator, ran_out: bool) -> None:
        """An epoch's iterator closed; if it is the latest one and was left before its end,
        note where it stood: a state taken now resumes there."""
        self._open.discard(iterator)
        if iterator.epoch + 1 != self.epoch or self._resume is not None:
            return  # superseded by a newer epoch, or a state was loaded since
        self._left_early = None if ran_out else iterator.position.snapshot()

    def load_state_dict(
        self, states: Any, skip_ahead: bool = False, allow_edited: bool = False, reweight: bool = False
    ) -> None:
        """Make the next epoch start where ``states`` (a state, or every rank's) were taken (see
        ``DataLoader.load_state_dict``); an epoch still open is ended (its next ``next()`` says why)."""
        resume, state, reshaped = read_states(states, self.spec, self.source, skip_ahead, allow_edited, reweight)
        self.source.reader.reweight = reweight
        base_seed = saved_base_seed(state, self.spec)
        for iterator in list(self._open):
            iterator.end("replaced", "position")
        if base_seed is not None:  # an unseeded loader's batches: seeded as the saving run's were
            self.spec = replace(self.spec, base_seed=base_seed)
        if "dataset" in state:
            self.spec.dataset.load_state_dict(state["dataset"])
        pool, self._pool = self._pool, None
        if pool is not None:  # persistent workers hold the old position and the old dataset
            pool.shutdown()
        self.source.close()  # a fixed-size feed, say: the state says where it resumes
        self.epoch = int(state["epoch"])
        if reshaped:  # what a state taken now says: this world's position, not the old one's
            state = make_state(resumed_position(self.epoch, resume), self.spec, self.source)
        self._resume, self._resume_state = resume, copy.deepcopy(state)
        self._left_early = None
        self._allow_edited = allow_edited

    def pending_resume(self) -> tuple[dict, bool, bool, bool] | None:
        """The state loaded and not yet run, with its ``skip_ahead``, ``allow_edited`` and
        ``reweight``, or None."""
        if self._resume is None or self._resume_state is None:
            return None
        return copy.deepcopy(self._resume_state), self._resume.skip_ahead, self._allow_edited, self.source.reader.reweight

    def set_epoch(self, epoch: int) -> bool:
        """Make the next epoch ``epoch``; True if the sampler should be told too. A loaded state
        resumes one epoch: setting another is an error, and setting that one changes nothing
        but a sampler without state hooks (the state restores the others)."""
        if self._resume is not None:
            if epoch == self.epoch:
                return not hasattr(self.spec.sampler, "load_state_dict")
            raise ArgumentValueError(
                f"set_epoch({epoch}) after load_state_dict(): the state resumes epoch {self.epoch}. "
                f"Run epoch {self.epoch} next (loader.epoch says which), or load no state."
            )
        self.epoch = epoch
        return True

    def length(self) -> int | None:
        """Batches handed out in one epoch (echoes included), or None for a stream."""
        batches = self.source.length()
        return None if batches is None else batches * self.spec.options.repeats

    def stats(self) -> Stats:
        """Timings of the latest epoch."""
        if self._last_recorder is None:
            raise RuntimeError("stats() needs an epoch: iterate the loader first.")
        return self._last_recorder.snapshot()

    def current_iterator(self) -> LoaderIterator | None:
        """The latest epoch's iterator, while the user still holds it."""
        return self._last_iterator() if self._last_iterator is not None else None

    def close(self) -> None:
        """End the open epoch if it runs on what this closes, stop persistent workers and close
        the source. Iterators stop their own workers."""
        try:
            self._end_open_epoch("closed")
        finally:
            pool, self._pool = self._pool, None
            try:
                if pool is not None:
                    pool.shutdown()
            finally:
                self.source.close()

    def __del__(self) -> None:
        # The loader and every open epoch are gone (each epoch's executor holds the pipeline).
        try:
            self.close()
        except Exception:
            pass

    def _shared(self) -> str:
        """What consecutive epochs share, in words ('' if nothing: they are independent)."""
        options = self.spec.options
        shared = []
        if options.parallel and (options.persistent_workers or self.source.worker_restart):
            shared.append("persistent workers")
        if options.epoch_size is not None:
            shared.append("fixed-size feed (epoch_size)")
        return " and ".join(shared)

    def _end_open_epoch(self, reason: str, newer: int | None = None) -> None:
        """End the latest epoch, if it is open and runs on what epochs share: its workers are
        about to serve another epoch, or to stop; its feed to be read by another, or closed."""
        shared = self._shared()
        current = self.current_iterator() if shared else None
        if current is not None:
            current.end(reason, shared, newer)

    def _executor(self, epoch: int, recorder: Recorder, resume: Resume | None) -> Any:
        spec, options = self.spec, self.spec.options
        tasks = self.source.tasks(epoch, resume)
        if self.source.reads_stream_here:
            tasks = timed_reads(tasks, recorder.read)
        if not options.parallel:
            # seeding="worker" leaves the global generators to the user's code, as PyTorch's
            # loader does without workers: only batch_rng() is seeded.
            per_batch = options.seeding == "batch"
            maker = BatchMaker(
                spec.dataset, spec.transform, spec.collator, spec.base_seed,
                restore_random_state=per_batch, seed_globals=per_batch,
                policy=spec.error_policy(), hooks=options.hooks,
            )
            return SerialExecutor(tasks, maker, recorder, owner=self)
        pool = self._persistent_pool(epoch)
        owns_pool = pool is None
        if owns_pool:
            pool = self._start_pool(epoch)
        on_close = pool.shutdown if owns_pool else None  # a persistent pool outlives the epoch
        with built_on(pool, owns_pool):
            return ParallelExecutor(
                pool, tasks, epoch, options, on_close, recorder, owner=self, resume=resume,
                worker_streams=self.source.worker_batch_size is not None, tuner=self._tuner,
            )

    def _worker_count(self) -> int:
        """Workers an epoch starts with: the option, or where tuned, what the tuner holds now."""
        if self._tuner is not None:
            return self._tuner.settings.workers
        return int(self.spec.options.num_workers)

    def _start_pool(self, epoch: int) -> Any:
        most = self._tuner.limits.max_workers if self._tuner is not None else None
        seed = None
        if self.spec.options.seeding == "worker":  # each epoch's workers seeded anew (PyTorch's way)
            drawn = self.drawn_workers_seed
            seed = drawn if drawn is not None else workers_seed(self.spec.base_seed, epoch)
        return start_pool(self.spec, self.source, self._worker_count(), most, seed)

    def _persistent_pool(self, epoch: int) -> Any:
        """The pool that outlives epochs (started on first use), or None when each epoch starts its own.

        Workers that read their own streams across fixed-size epochs keep
        those streams, so they persist too.
        """
        if not (self.spec.options.persistent_workers or self.source.worker_restart):
            return None
        if self._pool is not None:  # the epoch before has been ended (open_epoch)
            if self._pool.broken:
                self._pool.shutdown()  # a worker died last epoch: start afresh rather than fail forever
                self._pool = None
        if self._pool is None:
            self._pool = self._start_pool(epoch)
        return self._pool

    def _consumer_stages(self, upstream: Any, recorder: Recorder, position: Position) -> tuple[Any, Buffered | None]:
        """Wrap ``upstream`` in the consumer-side stages; also return the buffer stage, if any."""
        spec, options, adapter = self.spec, self.spec.options, self.spec.adapter
        upstream = self.source.consumer_stages(upstream, spec.collator, spec.error_policy())
        upstream = Tally(upstream, position)  # notes which tasks made each batch, then passes it on
        buffer = None
        if options.buffer_size:
            upstream = buffer = Buffered(upstream, options.buffer_size, options.buffer_on_request)
        if options.preload:
            upstream = Preload(upstream, adapter, options.preload_depth, recorder)
        elif adapter.name != "numpy":
            upstream = MapBatches(upstream, lambda batch: adapter.ready(adapter.convert(batch)))
        for transform in spec.batch_transforms:
            upstream = MapBatches(upstream, transform.apply)
        if options.repeats > 1:
            if not options.parallel and not (options.preload or options.buffer_size):
                upstream = Buffered(upstream, 1, False)  # make the next batch while echoing this one
            upstream = Echo(upstream, options.repeats, position)
        return upstream, buffer


def _autotuner(options: LoaderOptions, source: Any) -> Autotuner:
    """The tuner of a loader with num_workers="auto" or prefetch_factor="auto". Workers that
    read their own stream shards keep their count (it decides the shards): only the depth is tuned."""
    fixed = source.stream_workers
    return Autotuner(
        workers=options.tune_workers and fixed is None,
        depth=options.tune_depth,
        fixed_workers=fixed or (0 if options.tune_workers else int(options.num_workers)),
        fixed_depth=options.messages_ahead,
        threads=options.worker_type == "thread",
    )


def _closed_watch(pipeline: Pipeline) -> Any:
    """What an epoch's iterator calls when it closes, holding the pipeline only weakly (an
    iterator must not keep a dropped loader's pipeline alive)."""
    owner = weakref.ref(pipeline)

    def closed(iterator: LoaderIterator, ran_out: bool) -> None:
        pipeline = owner()
        if pipeline is not None:
            pipeline.epoch_closed(iterator, ran_out)

    return closed


def _warn_older_open(current: LoaderIterator, open_: Any) -> None:
    """Say that a state of the latest epoch leaves out an older one still open beside it."""
    older = sorted(iterator.epoch for iterator in list(open_) if iterator is not current and not iterator.closed)
    if not older:
        return
    epochs = ", ".join(str(epoch) for epoch in older)
    warn_argument(
        f"this state describes epoch {current.epoch} only, but the iterator of epoch {epochs} is "
        f"open beside it (iter(loader) was called again before it ended); a resume would not "
        f"make the rest of epoch {epochs}. Finish or close one epoch before starting the next "
        "(with iter(loader)), or keep one state per epoch yourself.",
        ResumeWarning,
    )
