"""``ImageFolder``: a labelled image dataset laid out as ``root/<class>/**/<image>``."""

from __future__ import annotations

import os
from hashlib import blake2b
from typing import Any, Callable

import numpy as np

from ._digest import digest
from ._image_codec import decode_bgr
from ._validate import check_bool
from .dataset import Dataset
from .errors import ArgumentTypeError, ArgumentValueError

#: Extensions read by default (compared case-insensitively); OpenCV and Pillow decode all of them.
IMAGE_EXTENSIONS = (
    ".bmp", ".jpeg", ".jpg", ".pgm", ".png", ".ppm", ".tif", ".tiff", ".webp",
)  # fmt: skip


def has_image_extension(path: str) -> bool:
    """The default ``check_valid_func``: the file name ends in one of ``IMAGE_EXTENSIONS``."""
    return path.lower().endswith(IMAGE_EXTENSIONS)


class ImageFolder(Dataset):
    """Images in ``root/<class>/...`` with the class as label.

    The classes are the sub-folders of ``root``, sorted by name; label ``i`` is
    the ``i``-th of them. Files are found recursively (symlinked folders
    followed) and kept when ``check_valid_func(path)`` is true (by default:
    the extension is one of ``IMAGE_EXTENSIONS``, case-insensitive).

    Item ``i`` is ``(image, label)``: the image as OpenCV decodes it (Pillow
    where OpenCV is missing), an ``(H, W, 3)`` uint8 BGR array (grayscale and
    16-bit files are converted),
    and the label as ``np.int32`` or, with ``class_name=True``, the class name.
    A file that cannot be decoded raises :class:`ImageDecodeError` naming it.
    With ``decode=False`` the image is the file's bytes (an :class:`ImageFile`, ``bytes`` that
    know their path), left for the transform to
    decode (``DecodeRandomResizedCrop``, ``DecodeResize`` or ``DecodeImage``), which
    then decodes in the workers and at the scale its output needs.

    The file list is stored as NumPy arrays (one byte buffer of all paths plus
    offsets, and an int32 label array), not as a list of Python objects. A
    forked worker that reads a Python object writes to its reference count,
    which copies the page it lives on: with a million ``(path, label)`` tuples
    every worker slowly duplicates the whole list (the copy-on-write trap).
    NumPy buffers are never written, so the workers keep sharing them.

    Args:
        root: the folder holding one sub-folder per class.
        check_valid_func: ``path -> bool`` deciding which files are samples.
        class_name: return the class name instead of its index.
        decode: decode each image (True), or return the file's bytes (False).
    """

    order = ("image", "image_category")

    def __init__(
        self,
        root: str | os.PathLike,
        check_valid_func: Callable[[str], bool] | None = None,
        class_name: bool = False,
        decode: bool = True,
    ) -> None:
        if not isinstance(root, (str, os.PathLike)):
            raise ArgumentTypeError(f"`root` must be a path; got {type(root).__name__}.")
        self.root = os.path.expanduser(os.fspath(root))
        if not os.path.isdir(self.root):
            raise ArgumentValueError(f"`root` must be an existing folder; got {self.root!r}.")
        if check_valid_func is not None and not callable(check_valid_func):
            raise ArgumentTypeError(
                f"`check_valid_func` must be None or a callable path -> bool; "
                f"got {type(check_valid_func).__name__}."
            )
        self.class_name = check_bool("class_name", class_name)
        self.decode = check_bool("decode", decode)
        self.classes = tuple(sorted(e.name for e in os.scandir(self.root) if e.is_dir()))
        if not self.classes:
            raise ArgumentValueError(
                f"`root` {self.root!r} has no class folders; ImageFolder expects "
                "root/<class name>/<image files>."
            )
        self.class_dict = {name: np.int32(i) for i, name in enumerate(self.classes)}
        # The predicate is used only here, so a lambda does not stop spawn workers pickling us.
        paths, offsets, labels = self._scan(check_valid_func or has_image_extension)
        self._paths, self._offsets, self.labels = paths, offsets, labels
        self._fingerprint: dict[str, Any] | None = None

    def _scan(self, check_valid: Callable[[str], bool]) -> tuple[np.ndarray, ...]:
        encoded: list[bytes] = []
        labels: list[int] = []
        for label, name in enumerate(self.classes):
            for folder, dirs, files in os.walk(os.path.join(self.root, name), followlinks=True):
                dirs.sort()
                for file in sorted(files):
                    path = os.path.join(folder, file)
                    if check_valid(path):
                        encoded.append(os.fsencode(path))
                        labels.append(label)
        if not encoded:
            raise ArgumentValueError(
                f"`root` {self.root!r} has class folders {list(self.classes[:5])}"
                f"{'...' if len(self.classes) > 5 else ''} but no files that `check_valid_func` "
                f"accepts (default: extensions {', '.join(IMAGE_EXTENSIONS)})."
            )
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in encoded], out=offsets[1:])
        paths = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        return paths, offsets, np.array(labels, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.labels)

    def order_fingerprint(self) -> dict[str, Any]:
        """Which file each index means, as plain values (names relative to ``root``, so the
        same tree copied elsewhere matches): a loader's resume state refuses another tree."""
        if self._fingerprint is None:
            root = os.fsencode(self.root)
            names = self._paths.tobytes().replace(root, b"")
            lengths = (np.diff(self._offsets) - len(root)).tobytes()
            self._fingerprint = {
                "kind": type(self).__name__,
                "classes": f"{len(self.classes)} classes, {digest(list(self.classes))}",
                "files": f"{len(self)} files, {blake2b(names + lengths, digest_size=8).hexdigest()}",
            }
        return self._fingerprint

    def path(self, index: int) -> str:
        """The file of item ``index``."""
        index = self._check_index(index)
        return os.fsdecode(self._paths[self._offsets[index] : self._offsets[index + 1]].tobytes())

    @property
    def samples(self) -> list[tuple[str, Any]]:
        """MegEngine's ``(path, label)`` list, built on each access (do not keep it in workers)."""
        return [(self.path(i), self._label(i)) for i in range(len(self))]

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        index = self._check_index(index)
        if not self.decode:
            path = self.path(index)
            with open(path, "rb") as file:
                return ImageFile(file.read(), path), self._label(index)
        return read_image(self.path(index)), self._label(index)

    def _label(self, index: int) -> Any:
        label = self.labels[index]
        return self.classes[label] if self.class_name else label

    def _check_index(self, index: int) -> int:
        length = len(self.labels)
        if not -length <= index < length:
            raise IndexError(f"index {index} is out of range for ImageFolder of length {length}")
        return int(index) + length if index < 0 else int(index)


class ImageFile(bytes):
    """An image file's bytes (``ImageFolder(decode=False)``'s items), with its ``path``, so that
    the transform that decodes them names the file when they do not decode."""

    path: str

    def __new__(cls, data: bytes, path: str) -> ImageFile:
        self = super().__new__(cls, data)
        self.path = path
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return ImageFile, (bytes(self), self.path)


#: What to do about a file of an ImageFolder that does not decode.
FILE_FIX = "Remove it, or pass a `check_valid_func` that skips it."


def read_image(path: str) -> np.ndarray:
    """Decode ``path`` as an ``(H, W, 3)`` uint8 BGR array, or raise naming the file."""
    with open(path, "rb") as file:  # open() handles any path; cv2.imread does not on Windows
        data = file.read()
    return decode_image(data, f"image {path!r}", FILE_FIX)


def decode_image(data: Any, what: str, fix: str, reduce: int = 1) -> np.ndarray:
    """Encoded image bytes (any buffer) as OpenCV's ``IMREAD_COLOR`` decodes them: ``(H, W, 3)``
    uint8 BGR, grayscale and 16-bit images converted, by OpenCV or, without it, Pillow (see
    :mod:`dataloader._image_codec`). Failure is :class:`ImageDecodeError` with ``what`` (what
    the bytes are, such as ``"image 'a/b.jpg'"``) and ``fix`` in its message. ``reduce`` (2, 4
    or 8) asks a JPEG's decoder for that fraction of each side; check the size you get."""
    return decode_bgr(data, what, fix, reduce)
