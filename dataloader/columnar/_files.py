"""Where columnar files are: local paths, URIs and ``pyarrow.fs`` filesystems, one way for all.

A source is a path, a URI (``file:///…``, ``s3://…``, anything
``pyarrow.fs.FileSystem.from_uri`` understands, and with fsspec installed
every scheme fsspec knows), a brace pattern (``shard-{000..099}.tar``), a
directory (its files with the wanted suffixes, recursively, in sorted order),
or a list of those. The filesystem may be a ``pyarrow.fs`` or an fsspec one.
A remote filesystem is read behind retries (:mod:`dataloader._remote`).
"""

from __future__ import annotations

import os
import posixpath
from typing import Any, Sequence

import pyarrow.fs as pafs

from .._digest import digest
from .._local import in_worker_process
from .._remote import Access, as_pyarrow, drop_listing, from_uri, path_on, unwrapped
from ..errors import ArgumentTypeError, ArgumentValueError
from ._braces import expand_braces

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")
# Written first into a directory by write_parquet_shards and removed last: while it is there the
# directory holds part of a dataset, and readers refuse it.
WRITE_IN_PROGRESS = "_WRITE_IN_PROGRESS"


def resolve_files(
    source: Any, suffixes: Sequence[str], filesystem: Any = None, what: str = "source", access: Access | None = None,
) -> tuple[pafs.FileSystem, list[str]]:
    """The filesystem and the file paths that ``source`` names (see the module), each file once.
    With ``access``, a remote filesystem comes back behind its retries.

    A directory is walked once per real directory, so a symbolic link back into the tree (a
    loop) or a second link to a directory adds nothing. A file that ``source`` reaches twice
    (named twice, or through two links) is refused: reading it twice would repeat its rows.
    """
    items = [source] if isinstance(source, (str, os.PathLike)) else list(_sequence(source, what))
    items = [name for item in items for name in _expanded(item)]
    if not items:
        raise ArgumentValueError(f"`{what}` names no file; got an empty list.")
    found: list[str] = []
    first: pafs.FileSystem | None = None
    for item in items:
        fs, path = filesystem_and_path(item, filesystem, what)
        if first is not None and not _same_filesystem(fs, unwrapped(first)):
            raise ArgumentValueError(
                f"`{what}` mixes filesystems ({type(first).__name__} and {type(fs).__name__}); "
                "give files of one filesystem."
            )
        if first is None:
            first = fs if access is None else access.reach(fs)
        found += _files_at(first, path, suffixes, what)
    _refuse_repeats(first, found, what)  # type: ignore[arg-type]
    return first, found  # type: ignore[return-value]


def _sequence(source: Any, what: str) -> Sequence:
    if isinstance(source, (list, tuple)):
        return source
    raise ArgumentTypeError(
        f"`{what}` must be a path, a URI or a list of them; got {type(source).__name__}."
    )


def filesystem_and_path(item: Any, filesystem: Any, what: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and the path on it that ``item`` (a path or a URI) names: on ``filesystem``
    (``pyarrow.fs`` or fsspec) when one is given, else from the URI's scheme, else the local
    filesystem (an absolute path)."""
    if not isinstance(item, (str, os.PathLike)):
        raise ArgumentTypeError(f"`{what}` must hold paths or URIs; got {type(item).__name__}.")
    text = os.fspath(item)
    if filesystem is not None:
        path = path_on(filesystem, text)
        return as_pyarrow(filesystem), path
    if "://" in text:
        return from_uri(text)
    return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(text))


def _same_filesystem(one: pafs.FileSystem, other: pafs.FileSystem) -> bool:
    if isinstance(one, pafs.PyFileSystem) and isinstance(other, pafs.PyFileSystem):
        return type(one.handler) is type(other.handler)
    return type(one) is type(other)


def _expanded(item: Any) -> list[Any]:
    """A brace pattern's paths (``shard-{000..099}.tar``); anything else as it is."""
    if isinstance(item, str) and "{" in item:
        return expand_braces(item)
    return [item]


def _files_at(fs: pafs.FileSystem, path: str, suffixes: Sequence[str], what: str) -> list[str]:
    drop_listing(fs, path)  # an fsspec filesystem's cached listing may be of files since replaced
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        return [path]
    if info.type != pafs.FileType.Directory:
        raise ArgumentValueError(f"`{what}` names {path!r}, which does not exist.")
    if fs.get_file_info(posixpath.join(path, WRITE_IN_PROGRESS)).type == pafs.FileType.File:
        raise ArgumentValueError(
            f"`{what}` names the directory {path!r}, which write_parquet_shards or write_tar_shards has not finished "
            f"writing (its {WRITE_IN_PROGRESS} marker is there): its shards hold part of the data "
            "at most. Write it again (overwrite=True); if you know the shards are whole, delete the marker."
        )
    if isinstance(fs, pafs.LocalFileSystem):
        files = _walk_local(path, tuple(suffixes))
    else:
        selector = pafs.FileSelector(path, recursive=True)
        listed = fs.get_file_info(selector)
        files = sorted(f.path for f in listed if f.type == pafs.FileType.File and f.path.endswith(tuple(suffixes)))
    if not files:
        raise ArgumentValueError(
            f"`{what}` names the directory {path!r}, which holds no {'/'.join(suffixes)} file."
        )
    return files


def _walk_local(top: str, suffixes: tuple[str, ...]) -> list[str]:
    """The files named ``*suffixes`` under local directory ``top``, sorted, following links but
    entering each real directory once (a link back up the tree would otherwise be followed
    until ELOOP)."""
    files: list[str] = []
    seen: set[str] = set()
    for directory, subdirectories, names in os.walk(top, followlinks=True):
        real = os.path.realpath(directory)
        if real in seen:
            subdirectories.clear()
            continue
        seen.add(real)
        subdirectories.sort()  # the first name of a directory reached twice is the same in every run
        files += [os.path.join(directory, name) for name in names if name.endswith(suffixes)]
    return sorted(name for name in files if os.path.isfile(name))  # not a broken link or a fifo


def _refuse_repeats(fs: pafs.FileSystem, paths: list[str], what: str) -> None:
    """Raise if two of ``paths`` are one file (local files: the same real path)."""
    local = isinstance(fs, pafs.LocalFileSystem)
    first: dict[str, str] = {}
    for path in paths:
        key = os.path.realpath(path) if local else path
        if key in first:
            raise ArgumentValueError(
                f"`{what}` reaches one file twice: {first[key]!r} and {path!r}"
                + (f" are both {key!r}" if key not in (path, first[key]) else "")
                + "; its rows would be read twice each epoch. Name each file once (to weight a "
                "file, sample it with weights instead of repeating it)."
            )
        first[key] = path


def mapped(filesystem: pafs.FileSystem) -> pafs.FileSystem:
    """The filesystem to read Parquet data through: in a worker process, a local one that
    memory-maps the files it opens; elsewhere ``filesystem`` itself.

    A mapped read takes its column chunks from the page cache as they are, instead of copying
    them into freshly allocated memory first. In a new worker process that memory is new each
    time (a page fault per 4 KiB): measured on 256 JPEGs (6 MB) per row group in a forked
    process, the first read took 12 ms copied and 8 ms mapped, and about 1,100 fewer faults.
    But a mapped file truncated or rewritten in place kills the reader with SIGBUS when it
    touches a page that is gone: in a worker process that is a death the main process reports,
    in the main process it would end the program, where a copying read raises an error.
    """
    if type(filesystem) is pafs.LocalFileSystem and in_worker_process():
        return pafs.LocalFileSystem(use_mmap=True)
    return filesystem


def files_fingerprint(paths: Sequence[str]) -> str:
    """The files of a dataset in a few words: their number and a digest of their names
    relative to the folder they share, so the same files copied elsewhere still match."""
    root = posixpath.commonpath(paths) if len(paths) > 1 else posixpath.dirname(paths[0])
    names = [posixpath.relpath(path, root) if root else path for path in paths]
    return f"{len(paths)} files, {digest(names)}"
