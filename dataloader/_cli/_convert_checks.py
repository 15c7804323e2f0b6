"""What ``convert`` checks: DEST before a row is read, and each image as it is written.

DEST is refused up front, before the progress bar starts: empty (it would mean the current
directory), SOURCE itself or a folder inside it (the shards would land in the ImageFolder, and
read back as a class of it), a file, a place that cannot be created, or a directory holding shards
of an earlier run without ``--overwrite``. An image that is empty or that cannot be decoded
(:func:`dataloader.image_folder.decode_image`, the path ``ImageFolder`` reads with) stops the
conversion with :class:`ImageDecodeError` naming the file, instead of being stored as a row
every epoch would fail on.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..argtypes import uncreatable
from ..errors import ArgumentValueError, DataLoaderError, ImageDecodeError
from ..image_folder import decode_image
from ..memory import available_cpus

_FIX = ("Remove or re-encode it (python -m dataloader doctor --scan SOURCE lists every such file), "
        "then convert again with --overwrite.")


def check_dest(source: str, dest: str, overwrite: bool) -> None:
    """Raise :class:`ArgumentValueError` for a DEST the conversion would write wrongly, or fail on."""
    from ..columnar._shard_files import earlier_write, open_directory  # pyarrow: only when converting
    import pyarrow.fs as pafs

    if not dest.strip():
        raise ArgumentValueError('DEST is an empty string; give a directory path or a URI ("." for the '
                                 "current directory).")
    try:
        fs, path, _ = open_directory(dest, None)
        info = fs.get_file_info(path)
    except DataLoaderError:
        raise
    except Exception as error:  # OSError from pyarrow, botocore's or fsspec's own from the others
        raise ArgumentValueError(_unreachable(dest, error)) from error
    local = isinstance(fs, pafs.LocalFileSystem)
    if local:
        _check_outside(source, path, dest)
    if info.type == pafs.FileType.File:
        raise ArgumentValueError(f"DEST {dest!r} is a file; give a directory (it is created if missing).")
    if info.type == pafs.FileType.Directory:
        earlier_write(fs, path, overwrite)  # shards of an earlier run, or foreign Parquet files
    if local:
        _check_creatable(path, dest)


def _unreachable(dest: str, error: BaseException) -> str:
    """Why DEST cannot be looked at, in one line, with what to check."""
    reason = (str(error).strip().splitlines() or [""])[0] or type(error).__name__
    if not isinstance(error, OSError):
        reason = f"{type(error).__name__}: {reason}"
    if "://" not in dest:
        return f"cannot look at DEST {dest!r}: {reason}."
    return (
        f"cannot reach DEST {dest!r}: {reason}. Check the URI (bucket, and for a server of your own "
        "?endpoint_override=HOST:PORT), the network and the credentials; or convert into a local "
        "directory and copy the shards."
    )


def _check_outside(source: str, path: str, dest: str) -> None:
    here, there = os.path.realpath(path), os.path.realpath(source)
    if here == there or here.startswith(there.rstrip(os.sep) + os.sep):
        raise ArgumentValueError(
            f"DEST {dest!r} is SOURCE {source!r} or a folder inside it: the shards would be written into "
            "the ImageFolder (and read back as a class of it); give a directory outside SOURCE."
        )


def _check_creatable(path: str, dest: str) -> None:
    """The directory ``path`` can be created, or written into where it exists."""
    problem = uncreatable(path)
    if problem is not None:
        raise ArgumentValueError(f"cannot create DEST {dest!r}: {problem}.")


def check_images(paths: list[str], images: list[bytes], decode: bool) -> None:
    """Raise :class:`ImageDecodeError` naming the first file that is empty or, with ``decode``,
    that does not decode (OpenCV, or Pillow without it). Decoding runs on a thread per usable CPU
    (both release the GIL while they decode)."""
    for path, data in zip(paths, images):
        if not data:
            raise ImageDecodeError(f"image {path!r} is empty (0 bytes). {_FIX}")
    if decode:
        with ThreadPoolExecutor(max(1, min(len(paths), available_cpus()))) as pool:
            list(pool.map(_decode, paths, images))  # list(): the first failure is raised here


def _decode(path: str, data: Any) -> None:
    decode_image(data, f"image {path!r}", _FIX)
