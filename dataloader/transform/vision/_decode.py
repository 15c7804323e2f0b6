"""``DecodeImage``: encoded image bytes in a sample (a Parquet row, say) decoded as ImageFolder does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Sequence

import numpy as np

from ...errors import ArgumentTypeError, ArgumentValueError
from ...image_folder import FILE_FIX, ImageFile, decode_image
from .._base import Transform

_FIX = "Replace the row's bytes with a good encoding of the image, or leave the row out when writing the data."


def failure_context(data: Any, where: str) -> tuple[str, str]:
    """What an error calls the bytes, and its fix: the file, for an ImageFolder's
    :class:`~dataloader.image_folder.ImageFile`; ``where`` in the sample otherwise."""
    if isinstance(data, ImageFile):
        return f"image {data.path!r}", FILE_FIX
    return where, _FIX


class DecodeImage(Transform):
    """Decode the encoded image (JPEG, PNG, ... bytes) in a sample into an ``(H, W, 3)`` uint8 BGR array.

    The image comes out exactly as :class:`~dataloader.ImageFolder` gives it
    for the same file (``cv2.imdecode(..., IMREAD_COLOR)``, or Pillow to the same
    result without OpenCV: grayscale and 16-bit images converted), so rows written by ``python -m dataloader
    convert`` and decoded here equal the folder's items. As the loader's
    ``transform`` (or the first step of a ``Compose``) it runs in the workers.

    The image is found by the sample's kind, and the sample comes back of the
    same kind with only the image replaced:

    * a dict (a Parquet or Arrow row): its ``key`` entry; the dict is copied,
      not changed in place. With ``fields``, the row becomes the tuple of
      those entries instead: ``fields=("image", "label")`` gives
      ``(image, label)``, ImageFolder's item, which the vision transforms'
      default ``order`` expects;
    * a tuple or list: the field at ``index``;
    * bytes (or any buffer): the sample is the image.

    Bytes that do not decode raise :class:`~dataloader.errors.ImageDecodeError`
    naming the field and, for a dict row with one, its ``path_key`` entry.

    Args:
        key: the dict key of the encoded image.
        index: the tuple position of the encoded image.
        path_key: the dict key naming the image's file, for error messages.
        fields: dict keys to return as a tuple, in this order (``key`` among them);
            None returns the dict.
    """

    def __init__(
        self, key: str = "image", index: int = 0, path_key: str = "path", fields: Sequence[str] | None = None
    ) -> None:
        for name, value in (("key", key), ("path_key", path_key)):
            if not isinstance(value, str):
                raise ArgumentTypeError(f"`{name}` must be a string (a dict key); got {value!r}.")
        if not isinstance(index, int) or isinstance(index, bool):
            raise ArgumentTypeError(f"`index` must be an integer (a tuple position); got {index!r}.")
        if fields is not None and (
            isinstance(fields, str) or not isinstance(fields, Sequence) or key not in fields
            or not all(isinstance(f, str) for f in fields)
        ):
            raise ArgumentTypeError(
                f"`fields` must be None or a sequence of dict keys that includes key={key!r}, such as "
                f"({key!r}, 'label'); got {fields!r}."
            )
        self.key, self.index, self.path_key = key, index, path_key
        self.fields = None if fields is None else tuple(fields)

    def apply(self, input: Any) -> Any:
        if isinstance(input, Mapping):
            if self.key not in input:
                raise ArgumentValueError(
                    f"{type(self).__name__}(key={self.key!r}) got a row without {self.key!r}; its keys are "
                    f"{list(input)}. Pass key= the column holding the encoded image."
                )
            path = input.get(self.path_key)
            where = f"the image in field {self.key!r}" + (f" of {path!r}" if isinstance(path, str) else "")
            if self.fields is None:
                return {**input, self.key: self._decode(input[self.key], where)}
            missing = [f for f in self.fields if f not in input]
            if missing:
                raise ArgumentValueError(
                    f"{type(self).__name__}(fields={self.fields}) got a row without {missing}; its keys are "
                    f"{list(input)}. Name keys the rows have."
                )
            image = self._decode(input[self.key], where)
            return tuple(image if f == self.key else input[f] for f in self.fields)
        if isinstance(input, (tuple, list)):
            if not -len(input) <= self.index < len(input):
                raise ArgumentValueError(
                    f"{type(self).__name__}(index={self.index}) got a sample of {len(input)} fields; pass index= "
                    "the position of the encoded image."
                )
            fields = list(input)
            fields[self.index] = self._decode(fields[self.index], f"the image at position {self.index}")
            return tuple(fields) if isinstance(input, tuple) else fields
        return self._decode(input, "the image")

    def _decode(self, data: Any, where: str) -> np.ndarray:
        data = self._encoded(data, where)
        return decode_image(data, *failure_context(data, where))

    def _encoded(self, data: Any, where: str) -> Any:
        """``data`` as a contiguous buffer of encoded bytes, or an error saying what it is instead."""
        name = type(self).__name__
        if isinstance(data, np.ndarray):
            if data.ndim != 1 or data.dtype != np.uint8:
                raise ArgumentTypeError(
                    f"{name} needs {where} as encoded bytes; got an array of shape {data.shape} and "
                    f"dtype {data.dtype}, which looks decoded already. Drop {name} for this data."
                )
            return np.ascontiguousarray(data)
        try:
            view = memoryview(data)
        except TypeError:
            raise ArgumentTypeError(
                f"{name} needs {where} as encoded bytes (bytes, a buffer or a uint8 array); got "
                f"{type(data).__name__}. Point key=/index= at the column of encoded images."
            ) from None
        return data if view.c_contiguous else view.tobytes()
