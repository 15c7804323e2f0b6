"""``write_tar_shards``: a dataset or an iterable of sample dicts as WebDataset tar shards.

Each sample becomes consecutive members ``<key>.<field>`` of a shard
(:func:`encode_field` says how each value becomes bytes), and each shard gets
its index beside it (``<shard>.idx``, :mod:`._tar_index`), so a
:class:`~dataloader.TarStream` built on them reads one small file per shard
instead of scanning it. The conventions are ``write_parquet_shards``': shards
``part-00000.tar``, ... written under temporary names and renamed when whole,
the ``_WRITE_IN_PROGRESS`` marker there from the first change to the last.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import posixpath
import re
import tarfile
import time
import uuid
from typing import Any, Iterator, Mapping

import numpy as np
import pyarrow.fs as pafs

from .._validate import check_bool, check_positive_int
from ..errors import ArgumentTypeError, ArgumentValueError
from ._files import WRITE_IN_PROGRESS
from ._shard_files import ShardFormat, finish_directory, open_directory, prepare_directory, uri_of
from ._tar_index import SIDECAR_SUFFIX, TarIndex, split_name
from ._tar_stream import INTEGER_FIELDS

# Without explicit sizes, a shard ends after the sample that takes it past this many bytes.
SHARD_BYTES = 256 * 2**20
MAX_SHARDS = 100_000  # five digits keep the names in order when sorted as text
KEY = "__key__"
_SHARD = re.compile(r"^part-\d{5}\.tar(\.idx)?$")
_TEMP = re.compile(r"^\.part-\d{5}\.tar(\.idx)?\.tmp-[0-9a-f]+$")
TAR_SHARDS = ShardFormat(_SHARD, _TEMP, (".tar",), "tar", "write_tar_shards", "tar ")


def write_tar_shards(
    data: Any,
    directory: str | os.PathLike[str],
    samples_per_shard: int | None = None,
    *,
    shard_bytes: int | None = None,
    progress: bool = False,
    filesystem: pafs.FileSystem | None = None,
    overwrite: bool = False,
) -> list[str]:
    """Write ``data`` as WebDataset shards ``part-00000.tar``, ``part-00001.tar``, ... in ``directory``.

    Args:
        data: a map dataset (``len`` and ``[i]``) or an iterable of samples (a
            :class:`~dataloader.StreamDataset`, a generator), each sample a dict.
        directory: a local path, a URI (``file:///...``, ``s3://...``) or, with
            ``filesystem``, a path on that filesystem. Created if missing.
        samples_per_shard: samples in each shard but the last.
        shard_bytes: a shard ends after the sample that takes it to this many bytes
            (default: 256 MiB when ``samples_per_shard`` is not given). With both, a
            shard ends at whichever comes first.
        progress: show a tqdm bar of samples written (``pip install tqdm``).
        filesystem: a ``pyarrow.fs`` filesystem ``directory`` is a path on.
        overwrite: replace the shards an earlier write left in ``directory``.

    Returns:
        The shards' paths, in order (as URIs when ``directory`` was a URI).

    A sample's ``__key__`` (a string) names its members, ``<key>.<field>``; without
    one, its position in ``data``, zero-padded (``000000042``). Every other key is a
    field, its value encoded by :func:`encode_field`: bytes as they are, ``str`` as
    UTF-8, numbers and booleans as their text, dicts and lists as JSON, NumPy
    arrays in the ``.npy`` format (``np.save``); ``None`` writes no member (the
    sample lacks that field). Keys starting with ``__`` other than ``__key__``
    (WebDataset's ``__url__`` and the like) are not written. What it writes reads
    back as it was, so it refuses what would not: a key or field name with a NUL
    or a lone surrogate, a key with an empty part (``a//b``), and a field that
    ``TarStream`` decodes as an int (``cls``, ``cls2``, ``index``, ``id``) given
    anything but an int or bytes (``True``, ``2.7``).

    As ``write_parquet_shards`` does, it writes an empty ``_WRITE_IN_PROGRESS``
    file first and deletes it last: while it is there readers refuse the
    directory. Each shard and its ``.idx`` are written under temporary names and
    renamed when whole.
    """
    limits = _limits(samples_per_shard, shard_bytes)
    check_bool("progress", progress)
    check_bool("overwrite", overwrite)
    samples = _samples(data)
    fs, path, uri = open_directory(directory, filesystem)
    bar_type = _progress_bar_type() if progress else None  # before any change: tqdm may be missing
    prepare_directory(fs, path, overwrite, TAR_SHARDS)
    bar = None if bar_type is None else bar_type(
        total=samples[1], unit="sample", desc="writing tar shards", dynamic_ncols=True
    )
    try:
        writer = TarShardWriter(fs, path, *limits)
        try:
            for number, sample in enumerate(samples[0]):
                writer.write(sample, number)
                if bar is not None:
                    bar.update(1)
            paths = writer.close()
        except BaseException as error:
            writer.abort()
            if hasattr(error, "add_note"):
                error.add_note(
                    f"write_tar_shards: {len(writer.paths)} whole shard(s) were written to {path!r} before "
                    f"this error, and no partial one; {WRITE_IN_PROGRESS} stays there, so readers refuse the "
                    "directory; pass overwrite=True to write them again."
                )
            raise
        if not paths:
            raise ArgumentValueError("`data` holds no samples; there is nothing to write.")
        finish_directory(fs, path)
    finally:
        if bar is not None:
            bar.close()
    return [uri_of(p, uri) for p in paths]


def _limits(samples_per_shard: Any, shard_bytes: Any) -> tuple[int | None, int | None]:
    if samples_per_shard is not None:
        check_positive_int("samples_per_shard", samples_per_shard)
    if shard_bytes is not None:
        check_positive_int("shard_bytes", shard_bytes)
    if samples_per_shard is None and shard_bytes is None:
        shard_bytes = SHARD_BYTES
    return samples_per_shard, shard_bytes


def _samples(data: Any) -> tuple[Iterator[Any], int | None]:
    """(the samples, their number where known)."""
    if isinstance(data, (str, bytes, Mapping)) or not (hasattr(data, "__iter__") or hasattr(data, "__getitem__")):
        raise ArgumentTypeError(
            "`data` must be a dataset (with __len__ and __getitem__) or an iterable of sample dicts; "
            f"got {type(data).__name__}."
        )
    if hasattr(data, "__len__") and hasattr(data, "__getitem__"):
        return (data[i] for i in range(len(data))), len(data)
    return iter(data), None


def _progress_bar_type() -> Any:
    try:
        from tqdm import tqdm
    except ImportError as error:
        raise ArgumentValueError(
            "`progress=True` needs tqdm, which is not installed: pip install tqdm, or pass progress=False."
        ) from error
    return tqdm


def shard_name(number: int) -> str:
    return f"part-{number:05d}.tar"


def encode_field(value: Any, key: str, field: str) -> bytes:
    """A field's value as a member's bytes (see :func:`write_tar_shards`)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bool, int, float, np.integer, np.floating, np.bool_)):
        return str(value.item() if isinstance(value, np.generic) else value).encode("ascii")
    if isinstance(value, np.ndarray):
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        return buffer.getvalue()
    if isinstance(value, (dict, list, tuple)):
        try:
            return json.dumps(value).encode("utf-8")
        except (TypeError, ValueError) as error:
            raise ArgumentTypeError(
                f"field {field!r} of sample {key!r} cannot be written as JSON ({error}); give it "
                "plain values (str, numbers, lists, dicts), or encode it to bytes yourself."
            ) from error
    raise ArgumentTypeError(
        f"field {field!r} of sample {key!r} is a {type(value).__name__}, which write_tar_shards cannot "
        "store; give bytes, str, a number, a dict or list (JSON) or a NumPy array, or encode it to bytes yourself."
    )


class TarShardWriter:
    """Writes samples into numbered shards, each with its index, cut by samples or bytes."""

    def __init__(self, fs: pafs.FileSystem, directory: str, samples: int | None, size: int | None) -> None:
        self.fs, self.directory, self.samples, self.size = fs, directory, samples, size
        self.paths: list[str] = []
        self.mtime = int(time.time())  # whole seconds: a fraction would cost each member a pax header
        self._keys: set[str] = set()
        self._stream: Any = None
        self._tar: tarfile.TarFile | None = None
        self._temp = ""
        self._offsets: list[int] = []
        self._fields: set[str] = set()

    def write(self, sample: Any, number: int) -> None:
        if not isinstance(sample, Mapping):
            raise ArgumentTypeError(
                f"sample {number} is a {type(sample).__name__}; write_tar_shards writes dict samples "
                "({'__key__': name, field: value, ...})."
            )
        key = self._key(sample, number)
        members = [
            (f, encode_field(_readable_value(v, f, key, number), key, f))
            for f, v in sample.items() if _is_field(f, key, number) and v is not None
        ]
        tar = self._shard()
        self._offsets.append(tar.offset)
        for field, data in members:
            info = tarfile.TarInfo(f"{key}.{field}")
            info.size, info.mtime, info.mode = len(data), self.mtime, 0o444
            tar.addfile(info, io.BytesIO(data))
            self._fields.add(field)
        if len(self._offsets) == self.samples or (self.size is not None and tar.offset >= self.size):
            self._finish_shard()

    def close(self) -> list[str]:
        if self._tar is not None:
            self._finish_shard()
        return self.paths

    def abort(self) -> None:
        """Delete the shard in progress; the finished ones stay (each is whole)."""
        tar, self._tar = self._tar, None
        if tar is None:
            return
        with contextlib.suppress(Exception):  # the error being handled is the one to report
            tar.close()
            self._stream.close()
        with contextlib.suppress(OSError):
            self.fs.delete_file(self._temp)

    def _key(self, sample: Mapping[str, Any], number: int) -> str:
        key = sample.get(KEY, f"{number:09d}")
        if not isinstance(key, str) or not key or "." in posixpath.basename(key) or key.endswith("/"):
            raise ArgumentValueError(
                f"sample {number} has the key {key!r}; a key must be a non-empty string without a dot "
                "after its last '/' (the first dot of a member's name ends the key)."
            )
        _check_readable(key, "key", key, number)
        read_back = split_name(f"{key}.x")
        if read_back != (key, "x"):
            raise ArgumentValueError(
                f"sample {number} has the key {key!r}, which a reader gets back as "
                f"{read_back[0] if read_back else None!r}: a key's '/' must separate non-empty parts "
                "(no '//'). Give the sample a key without empty parts."
            )
        if key in self._keys:
            raise ArgumentValueError(
                f"sample {number} has the key {key!r}, which an earlier sample has; readers would merge "
                "them or refuse the shard. Give every sample its own __key__."
            )
        self._keys.add(key)
        return key

    def _shard(self) -> tarfile.TarFile:
        if self._tar is None:
            number = len(self.paths)
            if number >= MAX_SHARDS:
                raise ArgumentValueError(
                    f"the data needs more than {MAX_SHARDS:,} tar shards; raise samples_per_shard or "
                    "shard_bytes so that the shards' names stay in order."
                )
            self._temp = posixpath.join(self.directory, f".{shard_name(number)}.tmp-{uuid.uuid4().hex}")
            self._stream = self.fs.open_output_stream(self._temp)
            self._tar = tarfile.open(fileobj=self._stream, mode="w|", format=tarfile.PAX_FORMAT)
            self._offsets, self._fields = [], set()
        return self._tar

    def _finish_shard(self) -> None:
        tar, self._tar = self._tar, None
        end = tar.offset  # type: ignore[union-attr]
        tar.close()  # type: ignore[union-attr]
        self._stream.close()
        final = posixpath.join(self.directory, shard_name(len(self.paths)))
        size = self.fs.get_file_info(self._temp).size or 0
        index = TarIndex(tuple(self._offsets), end, tuple(sorted(self._fields)), size)
        self.fs.move(self._temp, final)
        temp = posixpath.join(self.directory, f".{shard_name(len(self.paths))}{SIDECAR_SUFFIX}.tmp-{uuid.uuid4().hex}")
        with self.fs.open_output_stream(temp) as stream:
            stream.write(index.to_json().encode("utf-8"))
        self.fs.move(temp, final + SIDECAR_SUFFIX)
        self.paths.append(final)


def _is_field(name: Any, key: str, number: int) -> bool:
    if not isinstance(name, str) or not name or "/" in name:
        raise ArgumentTypeError(
            f"sample {key!r} has the field name {name!r}; field names must be non-empty strings without '/'."
        )
    if name.startswith("__"):
        return False
    _check_readable(name, "field name", key, number)
    return True


def _check_readable(name: str, what: str, key: str, number: int) -> None:
    """Refuse a key or field name that a tar member's name cannot carry back to a reader."""
    if "\x00" in name:
        why = "holds a NUL character, which ends a name in a tar header (a reader gets it cut short)"
    elif not _is_utf8(name):
        why = "is not valid Unicode (it holds a lone surrogate), so it cannot be written as UTF-8"
    else:
        return
    where = f"sample {number}" if what == "key" else f"sample {number} (key {key!r})"
    raise ArgumentValueError(f"{where} has the {what} {name!r}, which {why}. Give it a {what} of printable text.")


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _readable_value(value: Any, field: str, key: str, number: int) -> Any:
    """``value``, where a reader decodes it back as it was: a field TarStream decodes as an int
    (``cls``, ``cls2``, ``index``, ``id``, by the last part of its name) takes an int or bytes."""
    if field.rsplit(".", 1)[-1] not in INTEGER_FIELDS or value is None:
        return value
    if isinstance(value, (int, np.integer, bytes, bytearray, memoryview)) and not isinstance(value, bool):
        return value
    raise ArgumentTypeError(
        f"sample {number} (key {key!r}) has {field!r} = {value!r}, a {type(value).__name__}; TarStream "
        f"decodes a {field!r} field as an int, so this value would not read back. Give an int "
        "(a class number), bytes you encoded yourself, or name the field otherwise (a float as 'score', "
        "a flag as 'flag')."
    )

