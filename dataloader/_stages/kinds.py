"""What kind a dataset is, and which sampler goes with it: the checks ``DataLoader`` runs on
its ``dataset`` and ``sampler`` (or PyTorch's ``batch_size``/``shuffle``/``drop_last``) before a
:mod:`~dataloader._stages.source` is built."""

from __future__ import annotations

from typing import Any

from .._validate import check_bool, check_len, check_not_a_class, check_positive_int
from ..dataset import StreamDataset
from ..errors import ArgumentTypeError, ArgumentValueError, DataLoaderError
from ..sampler import RandomSampler, SequentialSampler, StreamSampler
from ..sampler._map import follow_dataset


def is_stream(dataset: Any) -> bool:
    """True for a stream, False for a map dataset, else a clear error.

    A :class:`~dataloader.StreamDataset` is a stream, and so is a
    ``torch.utils.data.IterableDataset`` whatever else it defines (PyTorch's own rule); so is any
    other object with ``__iter__`` but not both ``__getitem__`` and ``__len__``, where torch's
    ``Dataset.__getitem__`` (which only raises) does not count. Told from the classes' names:
    torch is never imported here.
    """
    check_not_a_class("dataset", dataset, "dataset")
    if isinstance(dataset, StreamDataset) or _torch_base(type(dataset), "IterableDataset"):
        return True
    if _indexable(dataset) and hasattr(dataset, "__len__"):
        return False
    if hasattr(dataset, "__iter__"):
        return True
    raise ArgumentTypeError(
        f"`dataset` must be a Dataset (with __getitem__ and __len__) or a StreamDataset (with "
        f"__iter__); got {type(dataset).__name__}, which has neither. Subclass dataloader.Dataset "
        "for random access, or dataloader.StreamDataset for an iterable."
    )


_TORCH_DATASETS = "torch.utils.data.dataset"  # where torch's Dataset and IterableDataset live


def _is_torch(cls: type, name: str) -> bool:
    """Whether ``cls`` is torch's ``torch.utils.data.<name>``."""
    module, qualname = getattr(cls, "__module__", None), getattr(cls, "__qualname__", None)
    return module == _TORCH_DATASETS and qualname == name


def _torch_base(cls: type, name: str) -> bool:
    """Whether torch's ``torch.utils.data.<name>`` is among ``cls``'s bases (or is ``cls``)."""
    return any(_is_torch(base, name) for base in cls.__mro__)


def _indexable(dataset: Any) -> bool:
    """Whether ``dataset`` has a ``__getitem__`` of its own: not only torch's ``Dataset``'s."""
    if not hasattr(dataset, "__getitem__"):
        return False
    owner = next((cls for cls in type(dataset).__mro__ if "__getitem__" in vars(cls)), None)
    return owner is None or not _is_torch(owner, "Dataset")


def sampler_from_shortcuts(
    dataset: Any, sampler: Any, batch_size: Any, shuffle: Any, drop_last: Any, seed: int | None
) -> Any:
    """The sampler PyTorch's ``batch_size``/``shuffle``/``drop_last`` describe (None leaves an
    option at PyTorch's default); a clear error when ``sampler`` is given as well. A map
    sampler built here follows the dataset's length (:func:`~dataloader.sampler._map.follow_dataset`)."""
    shortcuts = (("batch_size", batch_size), ("shuffle", shuffle), ("drop_last", drop_last))
    given = [f"{name}={value!r}" for name, value in shortcuts if value is not None]
    if sampler is not None:
        raise ArgumentValueError(
            f"`sampler` and {', '.join(given)} were both given; the sampler decides the batches. "
            "Drop the shortcut(s), or drop `sampler` and let them build one, e.g. "
            "RandomSampler(dataset, batch_size=32, drop_last=True)."
        )
    size = 1 if batch_size is None else check_positive_int("batch_size", batch_size)
    shuffled = False if shuffle is None else check_bool("shuffle", shuffle)
    dropped = False if drop_last is None else check_bool("drop_last", drop_last)
    if not is_stream(dataset):
        if shuffled:
            built = RandomSampler(dataset, batch_size=size, drop_last=dropped, seed=seed)
            return follow_dataset(built)
        return follow_dataset(SequentialSampler(dataset, batch_size=size, drop_last=dropped))
    if shuffled:
        raise ArgumentValueError(
            "shuffle=True: a stream has no order to shuffle. Shuffle inside the stream "
            "(ParquetStream and ArrowStream take shuffle= and shuffle_buffer=), and pass "
            "batch_size and drop_last only."
        )
    return StreamSampler(batch_size=size, drop_last=dropped)


def checked_sampler(dataset: Any, sampler: Any, stream: bool | None = None) -> Any:
    """``sampler``, or the default one (for a map dataset, one that follows its length), after
    checking that it suits the dataset's kind (``stream``, else :func:`is_stream`'s)."""
    if stream is None:
        stream = is_stream(dataset)
    if sampler is None:
        return StreamSampler(batch_size=1) if stream else follow_dataset(SequentialSampler(dataset))
    stream_sampler = isinstance(sampler, StreamSampler) or isinstance(
        getattr(sampler, "sampler", None), StreamSampler
    )
    if stream and not stream_sampler:
        raise ArgumentTypeError(
            f"a StreamDataset needs a StreamSampler; got {type(sampler).__name__}. "
            "Use sampler=StreamSampler(batch_size=...)."
        )
    if not stream and stream_sampler:
        raise ArgumentTypeError(
            "a map-style Dataset needs a map sampler; got StreamSampler. Use "
            "SequentialSampler(dataset, batch_size=...) or RandomSampler(dataset, batch_size=...)."
        )
    check_not_a_class("sampler", sampler, "sampler")
    if not hasattr(sampler, "__iter__"):
        raise ArgumentTypeError(
            f"`sampler` must be iterable (yielding lists of indices); got {type(sampler).__name__}."
        )
    if not stream:  # len() would refuse a negative length only when called, at iter(loader)
        _check_length("dataset", dataset)
        _check_length("sampler", sampler)
    return sampler


def _check_length(name: str, value: Any) -> None:
    """:func:`check_len`, leaving alone a ``__len__`` that raises: the loader may never need
    that length (it never measures the dataset of a sampler you gave, nor, with
    ``epoch_size``, the sampler)."""
    try:
        check_len(name, value)
    except DataLoaderError:
        raise
    except Exception:
        pass
