"""Which library decodes and encodes images, OpenCV or Pillow, and the two ways through.

OpenCV (``cv2``) is used where it imports; elsewhere (free-threaded CPython
3.14t, where no OpenCV wheel loads) Pillow decodes and the vision transforms
run on NumPy. ``DATALOADER_IMAGE_BACKEND=opencv|pillow`` forces one, so the
Pillow path can be tried where OpenCV is installed. Both give OpenCV's
``IMREAD_COLOR`` result: ``(H, W, 3)`` uint8 BGR, EXIF orientation applied,
grayscale, palette, alpha, CMYK and 16-bit images converted as OpenCV does.
The choice is made once per process, on first use, and never changes.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import os
import struct
from typing import Any

import numpy as np

from .errors import ArgumentValueError, ImageBackendError, ImageDecodeError

#: The environment variable that forces a backend, and the values it takes.
BACKEND_VARIABLE = "DATALOADER_IMAGE_BACKEND"
BACKENDS = ("opencv", "pillow")

#: What Pillow raises for bytes it cannot decode (plugins raise SyntaxError, struct.error,
#: EOFError or IndexError on malformed headers; truncated data is OSError).
_PILLOW_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, IndexError, struct.error)
_ORIENTATION = 0x0112  # the EXIF tag OpenCV's decoder applies
# cv2.IMREAD_REDUCED_COLOR_2/_4/_8, by value (cv2 is imported only where it decodes).
_OPENCV_REDUCED = {2: 17, 4: 33, 8: 65}
# EXIF orientation -> PIL.Image.Transpose value: what turns the stored pixels upright.
_TRANSPOSES = {2: 0, 3: 3, 4: 1, 5: 5, 6: 4, 7: 6, 8: 2}


@functools.lru_cache(maxsize=None)
def image_backend() -> str:
    """``"opencv"`` or ``"pillow"``: the variable's value if set, else OpenCV if ``cv2`` imports."""
    forced = os.environ.get(BACKEND_VARIABLE, "").strip().lower()
    if forced and forced not in BACKENDS:
        raise ArgumentValueError(
            f"{BACKEND_VARIABLE}={os.environ[BACKEND_VARIABLE]!r} is not an image backend; "
            f"set it to one of {', '.join(BACKENDS)}, or unset it to use OpenCV where it is installed."
        )
    if forced == "pillow":
        return "pillow"
    try:
        import cv2  # noqa: F401
    except ImportError as error:
        if forced == "opencv":
            raise ImageBackendError(
                f"{BACKEND_VARIABLE}=opencv but OpenCV does not import here ({error}): "
                "pip install opencv-python-headless (or the `opencv` extra: pip install "
                "'dataloader[opencv]'), or unset the variable to use Pillow."
            ) from error
        return "pillow"
    return "opencv"


def can_decode() -> bool:
    """Whether a library that decodes images (OpenCV or Pillow) is installed; imports neither."""
    return any(importlib.util.find_spec(name) is not None for name in ("cv2", "PIL"))


def decode_bgr(data: Any, what: str, fix: str, reduce: int = 1) -> np.ndarray:
    """Encoded image bytes (any buffer) -> ``(H, W, 3)`` uint8 BGR.

    Bytes that do not decode raise :class:`ImageDecodeError` naming ``what`` (such as
    ``"image 'a/b.jpg'"``) and ending with ``fix``. ``reduce`` (2, 4 or 8) asks a JPEG's decoder
    for ``1/reduce`` of each side (libjpeg's DCT scaling: ``ceil(H / reduce)`` rows); other
    formats ignore it, so callers check the size they got.
    """
    array = np.frombuffer(data, dtype=np.uint8)
    image = None
    if array.size:
        if image_backend() == "opencv":
            image = _decode_opencv(array, reduce)
        else:
            image = _decode_pillow(array, what, reduce)
    if image is None:
        raise ImageDecodeError(
            f"cannot decode {what} ({array.size} bytes): the file is corrupt, truncated "
            f"or not an image. {fix}"
        )
    return image


def encode_jpeg(image: np.ndarray, quality: int = 90) -> bytes:
    """A BGR uint8 image as JPEG bytes of ``quality`` (1-100), by the backend in use."""
    if image_backend() == "opencv":
        import cv2

        ok, encoded = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
        if not ok:
            raise ArgumentValueError(f"OpenCV cannot encode an array of shape {image.shape} as JPEG.")
        return bytes(encoded)
    Image = _pillow()
    rgb = image[:, :, ::-1] if image.ndim == 3 and image.shape[2] == 3 else image.squeeze()
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def _decode_opencv(array: np.ndarray, reduce: int = 1) -> np.ndarray | None:
    import cv2

    flag = _OPENCV_REDUCED[reduce] if reduce > 1 else cv2.IMREAD_COLOR
    try:
        image: np.ndarray | None = cv2.imdecode(array, flag)
    except cv2.error:  # some malformed headers make OpenCV raise instead of returning None
        return None
    return image


def _decode_pillow(array: np.ndarray, what: str, reduce: int = 1) -> np.ndarray | None:
    Image = _pillow()

    try:
        with Image.open(io.BytesIO(array.data)) as opened:
            if reduce > 1:  # picks 1/reduce: width // (width // reduce) is in [reduce, 2 * reduce)
                opened.draft("RGB", (max(1, opened.width // reduce), max(1, opened.height // reduce)))
            method = _TRANSPOSES.get(_exif_orientation(Image, opened))
            return _to_bgr(opened.transpose(method) if method is not None else opened, opened.format)
    except Image.DecompressionBombError as error:
        raise ImageDecodeError(
            f"Pillow refuses to decode {what}: {error} If the file is trusted, raise "
            "PIL.Image.MAX_IMAGE_PIXELS in the workers (a worker_init_fn), or decode with OpenCV."
        ) from None
    except _PILLOW_DECODE_ERRORS:
        return None


def _exif_orientation(Image: Any, opened: Any) -> int:
    """The orientation in the file's EXIF block, 1 without one. Only EXIF, as OpenCV reads it:
    Pillow's ``getexif()`` also takes one from XMP, which OpenCV ignores."""
    raw = opened.info.get("exif")
    if not raw:
        return 1
    exif = Image.Exif()
    try:
        exif.load(raw)
        return int(exif.get(_ORIENTATION, 1))
    except (*_PILLOW_DECODE_ERRORS, KeyError, TypeError):  # a malformed block: OpenCV ignores it too
        return 1


def _to_bgr(image: Any, file_format: str | None) -> np.ndarray:
    """A Pillow image (of a ``file_format`` file) as OpenCV's ``IMREAD_COLOR`` gives it: uint8
    BGR, 3 channels."""
    mode = image.mode
    if mode == "CMYK" and file_format == "JPEG":  # libjpeg's raw (inverted) inks, as OpenCV reads them
        return _cmyk_to_bgr(np.asarray(image), bool(image.info.get("adobe")))
    if mode.startswith("I") or mode == "F":  # 16- or 32-bit gray: OpenCV keeps the high byte
        gray = np.asarray(image).astype(np.float64 if mode == "F" else np.int64)
        gray = gray if mode == "F" else np.right_shift(gray, 8)
        gray8 = np.clip(gray, 0, 255).astype(np.uint8)
        return np.repeat(gray8[:, :, None], 3, axis=2)
    if mode == "L":
        return np.repeat(np.asarray(image)[:, :, None], 3, axis=2)
    if mode != "RGB":  # 1, LA, P, PA, RGBA, YCbCr, ...: alpha dropped, as OpenCV does
        image = image.convert("RGBA" if mode in ("P", "PA") else "RGB").convert("RGB")
    # Pillow packs BGR in one pass; the bytearray copy (a memcpy) makes the array writable.
    bgr = bytearray(image.tobytes("raw", "BGR"))
    return np.frombuffer(bgr, dtype=np.uint8).reshape(image.height, image.width, 3)


def _cmyk_to_bgr(cmyk: np.ndarray, adobe: bool) -> np.ndarray:
    """OpenCV's CMYK -> BGR on libjpeg's raw values (Pillow inverts Adobe files' values)."""
    raw = (255 - cmyk if adobe else cmyk).astype(np.int32)
    k = raw[:, :, 3:]
    rgb = k - (((255 - raw[:, :, :3]) * k) >> 8)
    return np.ascontiguousarray(rgb[:, :, ::-1].astype(np.uint8))


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError as error:
        raise ImageBackendError(
            "decoding images needs OpenCV or Pillow and neither is installed here: "
            "pip install 'dataloader[vision]'."
        ) from error
    return Image
