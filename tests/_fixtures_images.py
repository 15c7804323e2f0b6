"""A small ImageFolder of real image files, for the convert and DecodeImage tests.

The files are written with Pillow and a minimal PNG writer, not OpenCV, so the
fixture is the same on interpreters without OpenCV (free-threaded 3.14t).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image


def make_image_folder(root: Path, side: tuple[int, int] = (12, 16)) -> Path:
    """root/{cat,dog}: JPEGs written with Pillow, a grayscale PNG, a 16-bit RGB PNG."""
    rng = np.random.default_rng(0)
    for index in range(7):
        folder = root / ("cat" if index % 2 else "dog") / ("nested" if index == 5 else "")
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (*side, 3), dtype=np.uint8)
        Image.fromarray(pixels[:, :, ::-1].copy()).save(folder / f"{index}.jpg", quality=95)
    Image.fromarray(rng.integers(0, 256, side, dtype=np.uint8), mode="L").save(root / "cat" / "gray.png")
    (root / "dog" / "deep.png").write_bytes(png_bytes(rng.integers(0, 65535, (*side, 3), dtype=np.uint16)))
    return root


def png_bytes(pixels: np.ndarray) -> bytes:
    """An ``(H, W)`` or ``(H, W, C)`` uint8/uint16 array as PNG bytes, channels in RGB(A) order.

    Pillow cannot write 16-bit colour PNGs; this writes any bit depth and colour type PNG has.
    """
    pixels = pixels if pixels.ndim == 3 else pixels[:, :, None]
    height, width, channels = pixels.shape
    colour_type = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    depth = 16 if pixels.dtype == np.uint16 else 8
    rows = pixels.astype(">u2" if depth == 16 else np.uint8).reshape(height, -1).view(np.uint8)
    raw = np.hstack([np.zeros((height, 1), dtype=np.uint8), rows.reshape(height, -1)]).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, depth, colour_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
