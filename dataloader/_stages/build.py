"""Which source reads a dataset: :func:`build_source` picks one kind from the dataset and the
loader's options (with :mod:`.kinds`, the only place that tells dataset kinds apart)."""

from __future__ import annotations

from typing import Any

from ..callable_source import CallableSource
from ..errors import ArgumentValueError
from ..memory import available_cpus
from .fixed_epochs import FixedEpochs
from .kinds import is_stream
from .map_source import MapSource
from .source import Source
from .stream_sources import CallableTasks, StreamSource, WorkerStreamSource
from .streams import BatchSize


def build_source(dataset: Any, sampler: Any, options: Any, stream: bool | None = None) -> Source:
    """The source for ``dataset`` read with ``sampler`` under the loader's ``options``.

    ``sampler`` must already be checked (:func:`checked_sampler`); ``stream`` is the dataset's
    kind where the loader decided it (None: :func:`is_stream` decides).
    """
    source: Source
    if isinstance(dataset, CallableSource):
        dataset.check_batch_size(sampler.batch_size)
        if options.parallel_stream:
            raise ArgumentValueError(
                "a CallableSource is called by the main process; `parallel_stream=True` does not "
                "apply. Drop parallel_stream."
            )
        source = CallableTasks(dataset, sampler.batch_size)
    elif not (is_stream(dataset) if stream is None else stream):
        source = MapSource(sampler)
    elif options.parallel_stream and options.parallel:
        _check_worker_readable(dataset)
        # Shards follow the worker count: "auto" picks it once, from the CPUs (one left for the loop).
        workers = options.num_workers if isinstance(options.num_workers, int) else max(1, available_cpus() - 1)
        source = WorkerStreamSource(dataset, stream_batch_size(dataset, sampler), workers)
    else:
        source = StreamSource(dataset, stream_batch_size(dataset, sampler), options.timeout)
    if options.epoch_size is not None:
        source = FixedEpochs(source, options.epoch_size)
    return source


def _check_worker_readable(dataset: Any) -> None:
    """Refuse ``parallel_stream=True`` for a stream that only the main process can read
    (``reads_in_main_process = True``: a client of a service, such as a Ray Data iterator)."""
    if getattr(dataset, "reads_in_main_process", False):
        raise ArgumentValueError(
            f"{type(dataset).__name__} is read by the main process only (its reader cannot be "
            "copied into worker processes); `parallel_stream=True` would read it in each worker. "
            "Drop parallel_stream: the workers still run the per-sample transforms."
        )


def stream_batch_size(dataset: Any, sampler: Any) -> int:
    """Samples per task: the sampler's batch size, or 1 for a stream that yields whole batches
    (``yields_batches = True``: each item is a :class:`~dataloader.Collated`); a
    :class:`~dataloader._stages.streams.BatchSize` that also carries the sampler's ``drop_last``
    to where the stream is cut (and, for whole batches, the size under which one is short)."""
    drop_last = getattr(sampler, "drop_last", False) is True
    if not getattr(dataset, "yields_batches", False):
        return BatchSize(sampler.batch_size, drop_last)
    own = getattr(dataset, "batch_size", None)
    if sampler.batch_size not in (1, own):
        raise ArgumentValueError(
            f"{type(dataset).__name__} yields whole batches of its own batch_size ({own}); got "
            f"StreamSampler(batch_size={sampler.batch_size}). Use StreamSampler() or set the "
            "batch size on the dataset."
        )
    if drop_last and not (isinstance(own, int) and own > 0):
        raise ArgumentValueError(
            f"{type(dataset).__name__} yields whole batches but has no batch_size (it is {own!r}) "
            "to tell a short one by, so drop_last=True cannot drop it. Give the dataset its "
            "batch_size, or drop drop_last."
        )
    return BatchSize(1, drop_last, own if drop_last else 0)
