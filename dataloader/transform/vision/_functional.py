"""Image operations on HWC arrays, shared by the transforms.

Every function takes and returns ``(H, W, C)`` arrays: OpenCV drops a
trailing axis of length 1, and :func:`keep3d` puts it back. Colour operations
assume BGR channel order and values in ``[0, 255]`` (uint8 or float32), as
OpenCV and MegEngine do. Integer results are rounded to the nearest value and
saturated, not truncated.

The backend is chosen once, at import (:func:`dataloader._image_codec.image_backend`):
with ``"opencv"`` the calls below go to ``cv2``; with ``"pillow"`` (no OpenCV, as on
free-threaded 3.14t) to the NumPy versions in ``_numpy_resize`` and ``_numpy_color``,
or to the NumPy branches these functions already had for what OpenCV cannot take.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

from ..._image_codec import image_backend
from ...errors import ArgumentValueError
from . import _numpy_color
from ._numpy_resize import resize as numpy_resize

#: Which library the image operations use: "opencv" or "pillow" (NumPy here, Pillow to decode).
IMAGE_BACKEND = image_backend()
cv2: Any = importlib.import_module("cv2") if IMAGE_BACKEND == "opencv" else None

#: The dtypes OpenCV's array functions take; others (bool, int64, ...) go through NumPy.
_CV2_DTYPES = frozenset(
    np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float32, np.float64)
)


def keep3d(array: np.ndarray) -> np.ndarray:
    """Give back the channel axis OpenCV removes from single-channel results."""
    return array[:, :, None] if array.ndim == 2 else array


def to_dtype(image: np.ndarray, dtype: DTypeLike) -> np.ndarray:
    """Saturate float ``image`` to [0, 255] and cast it to ``dtype`` (rounding for integers)."""
    image = np.clip(image, 0, 255, out=image if image.dtype.kind == "f" else None)
    if np.dtype(dtype).kind in "iu":
        image = np.rint(image, out=image)
    return image.astype(dtype, copy=False)


def resize(image: np.ndarray, height: int, width: int, interpolation: int) -> np.ndarray:
    if image.shape[0] == height and image.shape[1] == width:
        return image
    if cv2 is None:
        return numpy_resize(image, height, width, interpolation)
    return keep3d(cv2.resize(image, (width, height), interpolation=interpolation))


def resize_nearest(array: np.ndarray, height: int, width: int) -> np.ndarray:
    """Nearest-neighbour resize sampling at pixel centres (for masks, of any dtype).

    Output pixel ``i`` takes input pixel ``floor((i + 0.5) * H / height)``, so a
    mask stays aligned with coordinates scaled by ``height / H``.
    """
    if array.shape[0] == height and array.shape[1] == width:
        return array
    rows, columns = _centres(height, array.shape[0]), _centres(width, array.shape[1])
    resized: np.ndarray = array[rows[:, None], columns]
    return resized


def _centres(count: int, source: int) -> np.ndarray:
    index = ((np.arange(count) + 0.5) * (source / count)).astype(np.intp)
    return np.minimum(index, source - 1)


def flip(image: np.ndarray, horizontal: bool, vertical: bool) -> np.ndarray:
    if not (horizontal or vertical):
        return image
    code = -1 if horizontal and vertical else (1 if horizontal else 0)
    if not _opencv_takes(image):  # NumPy for what OpenCV can't take
        return np.ascontiguousarray(image[:: -1 if vertical else 1, :: -1 if horizontal else 1])
    return keep3d(cv2.flip(image, code))


def pad(
    image: np.ndarray, sizes: tuple[int, int, int, int], value: float | Sequence[float]
) -> np.ndarray:
    """Pad ``(top, bottom, left, right)`` with ``value`` (one number or one per channel).

    A float ``value`` (or a sequence holding one) turns the image into float32,
    as in MegEngine; a sequence longer than the channel count is cut to it, as
    OpenCV does, so the default ``[0, 0, 0]`` also suits one-channel masks.
    """
    top, bottom, left, right = sizes
    height, width, channels = image.shape
    values = np.asarray(value)
    dtype = np.float32 if values.dtype.kind == "f" else image.dtype
    if values.ndim == 1:
        if values.size < channels:
            raise ArgumentValueError(
                f"the padding value {tuple(cast(Sequence[float], value))!r} has {values.size} entries "
                f"but the array has {channels} channels; give one number or at least one per channel."
            )
        values = values[:channels]
    if values.ndim == 0:
        values = np.full(channels, values)
    image = image.astype(dtype, copy=False)
    if _opencv_takes(image):
        # One pass in OpenCV; NumPy's fill broadcasts over a 3-long axis, ~50x slower.
        fill = tuple(float(v) for v in values) + (0.0,) * (4 - channels)
        border = cv2.BORDER_CONSTANT
        return keep3d(cv2.copyMakeBorder(image, top, bottom, left, right, border, value=fill))
    out = np.empty((height + top + bottom, width + left + right, channels), dtype=dtype)
    out[...] = values
    out[top : top + height, left : left + width] = image
    return out


def to_chw(array: np.ndarray) -> np.ndarray:
    """HWC -> contiguous CHW, one channel plane at a time (faster than a strided transpose)."""
    out = np.empty((array.shape[2],) + array.shape[:2], dtype=array.dtype)
    for channel in range(array.shape[2]):
        out[channel] = array[:, :, channel]
    return out


def add_noise(image: np.ndarray, noise: np.ndarray, scale: float, shift: float) -> np.ndarray:
    """``image + noise * scale + shift`` saturated to [0, 255], in the image's dtype (one pass)."""
    if image.dtype == np.uint8 and cv2 is None:
        return _numpy_color.add_weighted(noise, scale, image, 1.0, shift)
    if image.dtype == np.uint8:
        return keep3d(cv2.addWeighted(noise, scale, image, 1.0, shift, dtype=cv2.CV_8U))
    noise *= np.float32(scale)
    noise += np.float32(shift)
    noise += image
    return to_dtype(noise, image.dtype)


def to_gray(image: np.ndarray) -> np.ndarray:
    """The luma of a BGR image as ``(H, W, 1)``; a one-channel image is its own luma."""
    channels = image.shape[2]
    if channels == 1:
        return image
    if channels != 3:
        raise ArgumentValueError(
            f"colour transforms need a 1- or 3-channel (BGR) image; got shape {image.shape}."
        )
    if cv2 is None:
        return _numpy_color.bgr_to_gray(image)
    return keep3d(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY))


def scale_shift(image: np.ndarray, scale: float, shift: float) -> np.ndarray:
    """``image * scale + shift`` saturated to [0, 255], in the image's dtype."""
    if image.dtype == np.uint8:
        lut = np.arange(256, dtype=np.float32) * scale + shift
        return _lut(image, to_dtype(lut, np.uint8))
    out = image.astype(np.float32) * np.float32(scale)
    if shift:
        out += np.float32(shift)
    return to_dtype(out, image.dtype)


def blend_gray(image: np.ndarray, alpha: float) -> np.ndarray:
    """``image * alpha + gray(image) * (1 - alpha)``: saturation."""
    gray = to_gray(image)
    if image.shape[2] == 1:
        return image.copy()
    if cv2 is None:
        if image.dtype == np.uint8:
            return _numpy_color.add_weighted(image, alpha, gray, 1.0 - alpha, 0.0)
        out = image.astype(np.float32) * np.float32(alpha)
        out += gray.astype(np.float32) * np.float32(1 - alpha)  # (H, W, 1) broadcasts over BGR
        return to_dtype(out, image.dtype)
    gray = cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR)
    if image.dtype == np.uint8:
        blended: np.ndarray = cv2.addWeighted(image, alpha, gray, 1.0 - alpha, 0.0)
        return blended
    out = cv2.addWeighted(image.astype(np.float32), alpha, gray.astype(np.float32), 1 - alpha, 0.0)
    return to_dtype(out, image.dtype)


def shift_hue(image: np.ndarray, fraction: float) -> np.ndarray:
    """Rotate the hue by ``fraction`` of a turn (negative turns the other way)."""
    if image.shape[2] != 3:
        raise ArgumentValueError(
            f"HueTransform needs a 3-channel BGR image; got shape {image.shape}."
        )
    if image.dtype == np.uint8:
        hsv = _numpy_color.bgr_to_hsv_full(image) if cv2 is None else cv2.cvtColor(image, cv2.COLOR_BGR2HSV_FULL)
        # Python's % is never negative, so a negative shift wraps instead of overflowing.
        step = np.uint8(int(round(fraction * 256)) % 256)
        np.add(hsv[:, :, 0], step, out=hsv[:, :, 0])  # uint8 arithmetic wraps modulo 256
        return _numpy_color.hsv_full_to_bgr(hsv) if cv2 is None else cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR_FULL)
    unit = image.astype(np.float32) / np.float32(255)
    hsv = _numpy_color.bgr_to_hsv(unit) if cv2 is None else cv2.cvtColor(unit, cv2.COLOR_BGR2HSV)
    hsv[:, :, 0] = np.mod(hsv[:, :, 0] + np.float32(fraction * 360.0), np.float32(360.0))
    out = (_numpy_color.hsv_to_bgr(hsv) if cv2 is None else cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)) * np.float32(255)
    return to_dtype(out, image.dtype)


def channel_affine(image: np.ndarray, scale: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Float32 ``image * scale[c] + shift[c]`` per channel (broadcast from one number)."""
    channels = image.shape[2]
    if scale.size not in (1, channels) or shift.size not in (1, channels):
        raise ArgumentValueError(
            f"got {max(scale.size, shift.size)} per-channel values for an image with {channels} "
            f"channels (shape {image.shape}); give one number or one per channel."
        )
    scale = np.broadcast_to(scale, (channels,))
    shift = np.broadcast_to(shift, (channels,))
    out = image.astype(np.float32, order="C")  # a new array, written in place from here on
    if channels <= 4 and cv2 is not None:  # one fused pass in OpenCV; NumPy over a 3-long axis is slow
        matrix = np.zeros((channels, channels + 1), dtype=np.float64)
        matrix[np.arange(channels), np.arange(channels)] = scale
        matrix[:, channels] = shift
        return keep3d(cv2.transform(out, matrix, dst=out))
    height, width = image.shape[:2]
    rows = out.reshape(height, width * channels)  # a row-long operand: NumPy's fast inner loop
    rows *= np.tile(scale.astype(np.float32), width)
    rows += np.tile(shift.astype(np.float32), width)
    return out


def add_per_channel(image: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``image + offsets[c]`` saturated to [0, 255], in the image's dtype."""
    if image.dtype == np.uint8 and image.shape[2] == offsets.size:
        lut = np.arange(256, dtype=np.float32)[:, None] + offsets.astype(np.float32)[None, :]
        lut = to_dtype(lut, np.uint8).reshape(256, 1, offsets.size)
        return _lut(image, lut)
    out = channel_affine(image, np.ones(1), offsets.astype(np.float64))
    return to_dtype(out, image.dtype)


def _opencv_takes(image: np.ndarray) -> bool:
    """OpenCV is here and its array functions take this image (at most 4 channels, a dtype it knows)."""
    return cv2 is not None and image.shape[2] <= 4 and image.dtype in _CV2_DTYPES


def _lut(image: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``table[image]`` for uint8 ``image``: one table, or ``(256, 1, C)`` tables, one per channel."""
    if cv2 is None:
        return _numpy_color.lut(image, table)
    return keep3d(cv2.LUT(image, table))
