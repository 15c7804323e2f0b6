"""``TarStream``: WebDataset tar shards as a stream, sharded over ranks and workers.

It is a :class:`ColumnarStream` whose unit is one shard and whose rows are
the shard's samples (:mod:`._tar_units`), so planning, sharding, shuffling
and resume are the Parquet streams'; what is its own is the index that
locates samples in a shard (:mod:`._tar_index`) and the decoding of the
WebDataset text fields (:func:`decoders_for`).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import ArgumentTypeError, DataFileError
from ._streams import ColumnarStream
from ._tar_units import KEY, SHARD, TarUnits

Decoder = Callable[[bytes], Any]
TAR_SUFFIXES = (".tar",)


def _integer(data: bytes) -> int:
    return int(data.decode("utf-8").strip())


def _text(data: bytes) -> str:
    return data.decode("utf-8")


def _json(data: bytes) -> Any:
    return json.loads(data)


# The fields decode=True reads as an int, by the last part of the name (write_tar_shards takes ints only there).
INTEGER_FIELDS = ("cls", "cls2", "index", "id")
# WebDataset's text fields, by the last part of the field name ("seg.json" decodes as json).
DEFAULT_DECODERS: dict[str, Decoder] = {
    **dict.fromkeys(INTEGER_FIELDS, _integer), "txt": _text, "text": _text, "json": _json,
}


def decoders_for(decode: Any) -> dict[str, Decoder]:
    """The decoders ``decode`` asks for: True the defaults, False none, a dict the defaults
    with its own added or put in their place."""
    if decode is True:
        return dict(DEFAULT_DECODERS)
    if decode is False:
        return {}
    if isinstance(decode, Mapping) and all(isinstance(k, str) and callable(f) for k, f in decode.items()):
        return {**DEFAULT_DECODERS, **decode}
    raise ArgumentTypeError(
        "`decode` must be True (decode cls, txt, json and the other WebDataset text fields), False "
        f"(keep every field as bytes) or a dict {{field: function(bytes)}}; got {decode!r}."
    )


class TarStream(ColumnarStream):
    """WebDataset tar shards as a :class:`~dataloader.StreamDataset`, sharded over ranks and workers.

    ``source`` is a ``.tar`` file, a directory (its ``.tar`` files, recursively,
    sorted), a URI (``s3://bucket/shards/``), a brace pattern
    (``shards/train-{000000..000099}.tar``) or a list of them; ``filesystem`` a
    ``pyarrow.fs`` filesystem to resolve them on. A shard's members are grouped
    into samples by key as WebDataset groups them: ``a/x.jpg``, ``a/x.cls`` and
    ``a/x.json`` are the sample ``{"__key__": "a/x", "jpg": ..., "cls": ...,
    "json": ...}`` (the key is the name up to the first dot of its last part,
    the field the rest: ``x.seg.png`` is field ``seg.png``). A sample's members
    must be consecutive in the tar.

    What it yields: with ``batch_size=None``, rows ``{"__key__": key, field:
    value}``; with ``batch_size=N``, whole batches ``{field: array}``, as
    :class:`ParquetStream` does. ``decode=True`` decodes WebDataset's text
    fields (by the last part of the field name): ``cls``, ``cls2``, ``index``
    and ``id`` to ``int``, ``txt`` and ``text`` to ``str``, ``json`` to the
    parsed object; every other field (images, ``.npy``) stays ``bytes`` for the
    transform to decode, where the loader's ``on_error=`` policy applies.
    ``decode=False`` keeps every field as bytes; ``decode={field: function}``
    adds decoders or replaces the defaults (a function of the member's bytes;
    with the spawn start method it must be importable, not a lambda). A sample
    without a field's member has ``None`` there. In batches a field whose
    values are all ints (all floats) is a NumPy ``int64`` (``float64``) array,
    any other an object array. ``columns=["jpg", "cls"]`` reads only those
    fields (``__key__`` always comes). A field that fails to decode is a
    :class:`~dataloader.DataFileError` naming the shard, the key and the field.

    Guarantees, per epoch, as :class:`ParquetStream` gives them with a shard
    in place of a row group: every sample exactly once across all ranks and
    workers; ``shuffle=True`` reads the shards in an order seeded by ``(seed,
    epoch)`` and ``shuffle_buffer=K`` also permutes samples within windows of
    ``K``; ``equal=True`` and ``surplus=`` as there. A shard is cut between
    processes where the epoch's plan says, so ranks and workers may share a
    shard, each reading its own samples of it. Resume is exact:
    :meth:`~ParquetStream.state_dict` is the epoch and the samples this shard
    has delivered, and :meth:`~ParquetStream.load_state_dict` starts the next
    ``iter()`` right after them (with a shuffle buffer, by reading from the
    shard's start and dropping them) - a position WebDataset itself cannot
    resume from.

    The index: building the stream locates every sample of every shard (the
    offset of its first header) so that any run of samples is one ranged read.
    :func:`~dataloader.write_tar_shards` writes each shard's index beside it as
    ``<shard>.idx``; with it, building reads one small file per shard and the
    shard's last sample and end (a few shards at a time). A shard without one
    (written by ``tar`` or WebDataset's ``TarWriter``), or whose ``.idx`` was
    recorded for a shard of another size or does not end where the shard's
    samples end (a shard rewritten with more samples can keep its size: tar
    files are padded to 10 KiB records), is scanned instead: read once from start to end, which on object storage
    means downloading every shard once when the stream is built. A file that is
    not a tar, or is truncated, is an :class:`~dataloader.ArgumentValueError`
    naming it; a compressed one (``.tar.gz``) a :class:`~dataloader.DataFileError`
    saying so (decompress it: its samples are not at offsets of the file), and so is
    one with data other than zeros after its end-of-archive marker (tars joined
    with ``cat``: a scan, like tar, stops at the marker and would lose them). Afterwards every shard's size and modification time are checked
    whenever it is opened, so a shard replaced after the build is a
    :class:`~dataloader.SourceChangedError`, never samples read at stale offsets.

    Remote shards: the remote options of :class:`ParquetStream` (retries,
    read-ahead, the local cache) pass through ``**options`` and apply as
    there; the read-ahead knows each piece's exact size from the index.
    ``filter`` and ``verify_checksums`` are refused (tar members have no
    statistics and no checksums); filter in the transform instead.

    Example::

        stream = TarStream("shards/train-{000000..000099}.tar", shuffle=True, shuffle_buffer=1000)
        loader = DataLoader(stream, StreamSampler(batch_size=64), transform=DecodeImage(key="jpg"),
                            num_workers=4, parallel_stream=True)
    """

    _suffixes = TAR_SUFFIXES
    _units_type = TarUnits

    def __init__(
        self, source: Any, *, batch_size: int | None = None, columns: Any = None, decode: Any = True,
        shuffle: bool = False, seed: int | None = 0, shuffle_buffer: int = 0, world_size: int | None = None,
        rank: int | None = None, equal: bool = False, surplus: str = "drop", filesystem: Any = None,
        filter: Any = None, verify_checksums: bool = False, **options: Any,
    ) -> None:
        self._decoders = decoders_for(decode)
        for name in ("strings", "fill_null"):
            if name in options:
                raise ArgumentTypeError(
                    f"TarStream takes no `{name}`: its fields are bytes or decoded values, and a sample "
                    "without a field's member has None there. Drop it, or decode with decode={field: function}."
                )
        super().__init__(
            source, batch_size=batch_size, columns=columns, filter=filter, shuffle=shuffle, seed=seed,
            shuffle_buffer=shuffle_buffer, world_size=world_size, rank=rank, equal=equal, surplus=surplus,
            filesystem=filesystem, verify_checksums=verify_checksums, **options,
        )

    def _to_batch(self, table: Any) -> dict[str, Any]:
        batch: dict[str, Any] = {KEY: _objects(table.column(KEY).to_pylist())}
        shards = table.column(SHARD).to_numpy()
        for name in table.column_names:
            if name in (KEY, SHARD):
                continue
            values = table.column(name).to_pylist()
            decoder = self._decoder(name)
            if decoder is not None:
                values = [self._decoded(decoder, value, name, batch[KEY][i], shards[i]) for i, value in enumerate(values)]
            batch[name] = _column(values)
        return batch

    def _decoder(self, field: str) -> Decoder | None:
        decoders = self._decoders
        return decoders.get(field) or decoders.get(field.rsplit(".", 1)[-1])

    def _decoded(self, decoder: Decoder, value: bytes | None, field: str, key: str, shard: int) -> Any:
        if value is None:
            return None
        try:
            return decoder(value)
        except Exception as error:
            path = self._units.paths[shard]
            raise DataFileError(
                f"cannot decode field {field!r} of sample {key!r} in {path!r}: {type(error).__name__}: "
                f"{error}. Fix the shard, or pass decode={{{field!r}: function}} to decode it yourself "
                "(decode=False keeps every field as bytes).",
                path,
            ) from error


def _objects(values: list[Any]) -> np.ndarray[Any, Any]:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _column(values: list[Any]) -> np.ndarray[Any, Any]:
    """Decoded values as an array: int64 or float64 when they all are such numbers, else objects."""
    if values and all(type(v) is int for v in values):
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            return _objects(values)
    if values and all(type(v) is float for v in values):
        return np.array(values, dtype=np.float64)
    return _objects(values)
