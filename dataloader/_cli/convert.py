"""``python -m dataloader convert SOURCE DEST``: an ImageFolder directory or an .npz file as Parquet shards,
or an ImageFolder as WebDataset tar shards (``--format tar``).

An ImageFolder (``root/<class>/<images>``) becomes rows of ``image`` (the
file's encoded bytes, as they are on disk: decode them in the loader's
transform stage with :class:`dataloader.transform.vision.DecodeImage`),
``label`` (int32) and ``path`` (relative to the root, ``/``-separated), with
the class names as JSON under ``dataloader.classes`` in the schema
metadata. An ``.npz`` file of equal-length arrays (an ``ArrayDataset``)
becomes one column per array, named as in the file.

With ``--format tar`` an ImageFolder becomes WebDataset samples instead: the
key is the file's path relative to the root without its extension, the
image's bytes are the field named by the extension (``jpg``, ``png``), the
label is ``cls``; the class names go to ``DEST/classes.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import zipfile
from typing import Any

import numpy as np

from ..dataset import Collated, Dataset
from ..errors import ArgumentValueError, DataLoaderError
from ..image_folder import ImageFolder
from .._image_codec import can_decode
from ..argtypes import positive_int
from ._convert_checks import check_dest, check_images

KINDS = ("imagefolder", "npz")
FORMATS = ("parquet", "tar")
CLASSES_FILE = "classes.json"  # --format tar: the class names, beside the shards
_TAR_CHUNK = 64  # images read (and decode-checked, on threads) at a time for --format tar
# The writer's codecs (dataloader.columnar._writer.COMPRESSIONS, which a test compares), named here so
# that building the parser does not import pyarrow for the other commands.
COMPRESSIONS = ("zstd", "snappy", "lz4", "gzip", "brotli", "none")
# Encoded images are compressed already: zstd barely shrinks them, and a reader would pay for a
# decompression of every row group (benchmarks/columnar.py's image Parquet: 0.90-0.95x
# ImageFolder with zstd, 0.96-0.97x without).
DEFAULT_COMPRESSION = {"imagefolder": "none", "npz": "zstd"}
CLASSES_KEY = "dataloader.classes"


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "convert",
        help="write an ImageFolder directory or an .npz file as Parquet (or WebDataset tar) shards",
        description="Write an ImageFolder directory (root/<class>/<images>: columns image, label, path) "
        "or an .npz file of equal-length arrays (one column per array) as Parquet shards "
        "DEST/part-00000.parquet, ...; with --format tar, an ImageFolder as WebDataset tar shards "
        "DEST/part-00000.tar, ... (members <path>.<ext> and <path>.cls).",
    )
    parser.add_argument(
        "source", metavar="SOURCE", help="an ImageFolder directory, or an .npz file of equal-length arrays"
    )
    parser.add_argument(
        "dest", metavar="DEST", help="the directory (a path or a URI) to write the shards into; created if missing"
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="parquet",
        help="the shards' format: parquet (default) or tar (WebDataset shards, for an ImageFolder)",
    )
    parser.add_argument(
        "--rows-per-shard", type=positive_int, metavar="N",
        help="rows (tar: samples) in each shard but the last (default: about 256 MiB of data per shard)",
    )
    parser.add_argument(
        "--row-group-size", type=positive_int, metavar="N",
        help="rows per Parquet row group (default: about 32 MiB of data, at most a shard)",
    )
    parser.add_argument(
        "--compression", choices=COMPRESSIONS,
        help="the Parquet compression codec (default: none for an ImageFolder, whose JPEG or PNG "
        "bytes barely compress and would cost a decompression at every read; zstd for .npz)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace the shards an earlier run left in DEST")
    parser.add_argument(
        "--kind", choices=KINDS,
        help="what SOURCE is (default: imagefolder for a directory, npz for a file ending in .npz)",
    )
    parser.add_argument(
        "--no-decode-check", action="store_true",
        help="write an ImageFolder's files without decoding each first to check it (faster; empty "
        "files are still refused)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..columnar import write_parquet_shards  # imported here: the other commands need no pyarrow

    start = time.perf_counter()
    if getattr(args, "format", "parquet") == "tar":
        return _run_tar(args, start)
    try:
        kind = args.kind or _kind(args.source)
        check_dest(args.source, args.dest, args.overwrite)  # before the progress bar, and before reading
        data: Any
        if kind == "imagefolder":
            data, rows, metadata = _image_folder(args.source, not getattr(args, "no_decode_check", False))
        else:
            data, rows, metadata = _npz(args.source)
        paths = write_parquet_shards(
            data,
            args.dest,
            args.rows_per_shard,
            row_group_size=args.row_group_size,
            compression=args.compression or DEFAULT_COMPRESSION[kind],
            progress=importlib.util.find_spec("tqdm") is not None,  # the bar goes to stderr
            overwrite=args.overwrite,
            metadata=metadata,
        )
    except (DataLoaderError, OSError) as error:
        print(f"python -m dataloader convert: error: {_message(error)}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    size = sum(_size(path) for path in paths)
    print(
        f"{rows:,} rows in {len(paths)} shard(s), {_human(size)}, "
        f"in {seconds:.2f} s: {args.dest}"
    )
    return 0


def _run_tar(args: argparse.Namespace, start: float) -> int:
    """``--format tar``: an ImageFolder as WebDataset tar shards, the class names in classes.json."""
    from ..columnar import write_tar_shards
    from ..columnar._shard_files import earlier_write, open_directory
    from ..columnar._tar_writer import TAR_SHARDS
    import pyarrow.fs as pafs

    try:
        parquet_only = [name for name, value in (("--row-group-size", args.row_group_size),
                                                 ("--compression", args.compression)) if value is not None]
        if parquet_only:
            raise ArgumentValueError(
                f"{' and '.join(parquet_only)} apply to Parquet shards only; drop them for --format tar."
            )
        if (args.kind or _kind(args.source)) != "imagefolder":
            raise ArgumentValueError(
                "--format tar writes an ImageFolder's images as WebDataset samples; convert an .npz file "
                "to Parquet (leave --format out)."
            )
        check_dest(args.source, args.dest, args.overwrite)
        fs, path, _ = open_directory(args.dest, None)
        if fs.get_file_info(path).type == pafs.FileType.Directory:
            earlier_write(fs, path, args.overwrite, TAR_SHARDS)  # before the progress bar
        images, rows, metadata = _image_folder(args.source, not getattr(args, "no_decode_check", False))
        paths = write_tar_shards(
            _tar_samples(images), args.dest, args.rows_per_shard, overwrite=args.overwrite,
            progress=importlib.util.find_spec("tqdm") is not None,
        )
        with fs.open_output_stream(f"{path}/{CLASSES_FILE}") as out:
            out.write(metadata[CLASSES_KEY].encode("utf-8"))
    except (DataLoaderError, OSError) as error:
        print(f"python -m dataloader convert: error: {_message(error)}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    size = sum(_size(shard) for shard in paths)
    print(f"{rows:,} samples in {len(paths)} tar shard(s), {_human(size)}, in {seconds:.2f} s: {args.dest}")
    return 0


def _tar_samples(images: EncodedImages) -> Any:
    """The ImageFolder's files as WebDataset samples, read a chunk at a time."""
    for first in range(0, len(images), _TAR_CHUNK):
        batch = images.__getitems__(list(range(first, min(first + _TAR_CHUNK, len(images))))).batch
        for image, label, relative in zip(batch["image"], batch["label"], batch["path"]):
            folder, _, name = relative.rpartition("/")
            stem, dot, extension = name.rpartition(".")
            stem = (stem if dot else name).replace(".", "_")  # the key's first dot would end it
            yield {"__key__": f"{folder}/{stem}" if folder else stem, (extension.lower() if dot else "img"): image,
                   "cls": int(label)}


def _message(error: BaseException) -> str:
    """The error and its notes (how many shards the writer left) as one line, in the command
    line's words."""
    notes = getattr(error, "__notes__", [])
    message = " ".join([str(error) or type(error).__name__, *notes]).replace("\n", " ")
    return message.replace("pass overwrite=True", "pass --overwrite").replace("`directory`", "DEST")


def _human(size: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,} {unit}" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    return ""


def _kind(source: str) -> str:
    if os.path.isdir(source):
        return "imagefolder"
    if source.lower().endswith(".npz"):
        return "npz"
    raise ArgumentValueError(
        f"SOURCE {source!r} is neither a directory nor an .npz file; give an ImageFolder directory "
        "or an .npz file, or say which it is with --kind."
    )


class EncodedImages(Dataset):
    """An ImageFolder's files as rows: the file's bytes (not decoded), the label, the relative path.

    Each file is checked as it is read (:func:`check_images`): an empty one is refused, and with
    ``decode`` one that does not decode too, naming the file.
    """

    def __init__(self, folder: ImageFolder, decode: bool = True) -> None:
        self.folder, self.decode = folder, decode

    def __len__(self) -> int:
        return len(self.folder)

    def __getitem__(self, index: int) -> dict[str, Any]:
        batch = self.__getitems__([index]).batch
        return {name: column[0] for name, column in batch.items()}

    def __getitems__(self, indices: list[int]) -> Collated:
        paths = [self.folder.path(i) for i in indices]
        images = []
        for path in paths:
            with open(path, "rb") as file:
                images.append(file.read())
        check_images(paths, images, self.decode)
        relative = [os.path.relpath(path, self.folder.root).replace(os.sep, "/") for path in paths]
        batch = {"image": images, "label": self.folder.labels[indices], "path": relative}
        return Collated(batch, len(indices))


def _image_folder(source: str, decode: bool) -> tuple[EncodedImages, int, dict[str, str]]:
    folder = ImageFolder(source)
    if decode and not can_decode():
        print("convert: neither OpenCV nor Pillow is installed (pip install 'dataloader[vision]'), so the "
              "images are not decoded to check them; only empty files are refused", file=sys.stderr)
        decode = False
    return EncodedImages(folder, decode), len(folder), {CLASSES_KEY: json.dumps(list(folder.classes))}


def _npz(source: str) -> tuple[dict[str, np.ndarray], int, dict[str, str]]:
    _check_npz_header(source)
    try:
        archive = np.load(source, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            archive = None
        else:
            with archive:
                arrays = {name: archive[name] for name in archive.files}
    except ValueError as error:  # object arrays, which need pickle
        raise ArgumentValueError(
            f"cannot read {source!r} without pickle ({error}); save the arrays with numeric, "
            "string or bytes dtypes, not dtype=object."
        ) from error
    except (OSError, zipfile.BadZipFile) as error:
        raise ArgumentValueError(f"cannot read {source!r} as an .npz file ({error}).") from error
    if archive is None:
        raise ArgumentValueError(
            f"{source!r} holds one array (a .npy file), not an .npz archive; save it with "
            "np.savez(path, name=array, ...)."
        )
    lengths = {name: len(array) if array.ndim else None for name, array in arrays.items()}
    if not arrays or None in lengths.values() or len(set(lengths.values())) != 1:
        raise ArgumentValueError(
            f"{source!r} must hold arrays of one length (a row per item); got lengths {lengths}. "
            "Save only the per-row arrays in it."
        )
    rows = next(iter(lengths.values()))
    if not rows:  # refused now, not after the progress bar has started
        raise ArgumentValueError(f"{source!r} holds arrays of length 0: there are no rows to write.")
    return arrays, rows, {}


def _check_npz_header(source: str) -> None:
    """Refuse a file that is neither a zip archive nor a .npy array by its first bytes: anything
    else is read by ``np.load`` as a pickle, and refused as "pickled data" it does not hold."""
    try:
        with open(source, "rb") as file:
            head = file.read(6)
    except OSError as error:
        raise ArgumentValueError(f"cannot read SOURCE {source!r}: {error.strerror or error}.") from error
    if not head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY")):  # a zip (or empty zip), a .npy
        raise ArgumentValueError(
            f"SOURCE {source!r} is not an .npz (zip) archive: "
            f"{f'its first bytes are {head!r}' if head else 'it is empty'}. Save the arrays "
            "with np.savez(path, name=array, ...), or give an ImageFolder directory."
        )


def _size(path: str) -> int:
    from ..columnar._files import filesystem_and_path  # pyarrow: imported only when converting

    fs, inner = filesystem_and_path(path, None, "shard")
    return fs.get_file_info(inner).size or 0
