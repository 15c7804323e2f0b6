"""A small ImageFolder of real image files, for the convert and DecodeImage tests."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from PIL import Image


def make_image_folder(root: Path, side: tuple[int, int] = (12, 16)) -> Path:
    """root/{cat,dog}: JPEGs written with OpenCV, a grayscale PNG with Pillow, a 16-bit PNG."""
    rng = np.random.default_rng(0)
    for index in range(7):
        folder = root / ("cat" if index % 2 else "dog") / ("nested" if index == 5 else "")
        folder.mkdir(parents=True, exist_ok=True)
        assert cv2.imwrite(str(folder / f"{index}.jpg"), rng.integers(0, 256, (*side, 3), dtype=np.uint8))
    Image.fromarray(rng.integers(0, 256, side, dtype=np.uint8), mode="L").save(root / "cat" / "gray.png")
    assert cv2.imwrite(str(root / "dog" / "deep.png"), rng.integers(0, 65535, (*side, 3), dtype=np.uint16))
    return root
