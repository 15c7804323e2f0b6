"""The decode bench's JPEGs: photo-like images at three sizes, written once as an ImageFolder.

Each image is a smooth colour field (a random 3-7 cell grid, cubic-interpolated) with a few
anti-aliased ellipses of flat colour on it, a luminance texture of three octaves of smooth
noise, and fine per-pixel noise; the texture's strength varies per image. Encoded by OpenCV at
quality 90 (4:2:0 chroma), they come out at about 2.3-2.8 bits per pixel, as photos do at that
quality: ~21 KB at 256x256, ~60 KB at 500x375, ~350 KB at 1280x960 (:func:`describe` says what
a set holds). Everything is seeded by the set's size and the image's number, so a set is the
same bytes on every machine with the same OpenCV.

A set lies in ``root/class<k>/<n>.jpg`` (``CLASSES`` classes, image ``n`` in class
``n % CLASSES``), the layout ``ImageFolder``, DALI's ``readers.file`` and a file list all read.
:func:`ensure_set` writes it into a fresh folder and renames it into place, so a folder that
exists is complete and is reused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CLASSES = 4
QUALITY = 90


@dataclass(frozen=True)
class ImageSet:
    """One size of image: its name on the command line and its (height, width)."""

    name: str
    height: int
    width: int
    texture: float  # the texture's strength: sets the bits per pixel near a photo's


SETS = {
    "256": ImageSet("256", 256, 256, 0.85),
    "500": ImageSet("500", 375, 500, 0.95),
    "1280": ImageSet("1280", 960, 1280, 0.92),
}


#: Where the sets are cached unless ``--data`` says otherwise.
DEFAULT_DATA = Path(tempfile.gettempdir()) / "dataloader-bench-decode"


def set_root(data: Path, image_set: ImageSet, count: int) -> Path:
    """The folder of a set under ``data``, named by the set and its count (``v1``: bump it
    when the images change)."""
    return Path(data) / f"v1-{image_set.name}-{count}"


def photo(image_set: ImageSet, index: int) -> np.ndarray:
    """Image ``index`` of the set: ``(height, width, 3)`` uint8, BGR as OpenCV writes it."""
    import cv2

    rng = np.random.default_rng([image_set.height, image_set.width, index])
    h, w = image_set.height, image_set.width
    sh, sw = max(8, h // 4), max(8, w // 4)  # the smooth parts are drawn at a quarter size
    grid = rng.uniform(0, 255, (int(rng.integers(3, 7)), int(rng.integers(3, 7)), 3))
    low = cv2.resize(grid.astype(np.float32), (sw, sh), interpolation=cv2.INTER_CUBIC)
    for _ in range(int(rng.integers(3, 8))):
        centre = (int(rng.integers(0, sw)), int(rng.integers(0, sh)))
        axes = (int(rng.integers(sw // 20 + 1, sw // 3)), int(rng.integers(sh // 20 + 1, sh // 3)))
        colour = tuple(float(v) for v in rng.uniform(0, 255, 3))
        cv2.ellipse(low, centre, axes, float(rng.uniform(0, 180)), 0, 360, colour, -1, cv2.LINE_AA)
    strength = image_set.texture * float(rng.uniform(0.75, 1.25))
    texture = np.zeros((sh, sw), np.float32)
    for cells, amplitude in ((8, 1.0), (32, 0.6), (96, 0.5)):
        noise = rng.standard_normal((max(2, cells * sh // sw), cells), dtype=np.float32)
        texture += amplitude * cv2.resize(noise, (sw, sh), interpolation=cv2.INTER_CUBIC)
    low += (9 * strength * texture)[..., None] * np.array([1.0, 0.95, 1.05], np.float32)
    image = cv2.resize(low, (w, h), interpolation=cv2.INTER_LINEAR)
    image += (7 * strength * rng.standard_normal((h, w), dtype=np.float32))[..., None]
    return np.clip(image, 0, 255).astype(np.uint8)


def encode(image: np.ndarray) -> bytes:
    """``image`` as a quality-90 JPEG (OpenCV's encoder: libjpeg-turbo, 4:2:0)."""
    import cv2

    ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, QUALITY])
    if not ok:
        raise RuntimeError("OpenCV could not encode a generated image as JPEG.")
    return data.tobytes()


def files(root: Path) -> list[Path]:
    """The set's files in ImageFolder's order (class folders sorted, then names sorted)."""
    return sorted(root.glob("class*/*.jpg"))


def ensure_set(image_set: ImageSet, count: int, data: Path = DEFAULT_DATA) -> Path:
    """The folder of ``count`` images of ``image_set`` under ``data``, written now unless it is
    already there.

    A folder is taken as written when it holds the count; it is written beside its final place
    and renamed into it, so an interrupted run leaves no half set behind.
    """
    root = set_root(data, image_set, count)
    if root.is_dir() and len(files(root)) == count:
        return root
    if root.exists():
        raise RuntimeError(
            f"{root} exists but does not hold the {count} images of set {image_set.name}; "
            "give another --data folder or remove it.")
    root.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
    for k in range(CLASSES):
        (partial / f"class{k}").mkdir()
    for n in range(count):
        (partial / f"class{n % CLASSES}" / f"{n}.jpg").write_bytes(encode(photo(image_set, n)))
    try:
        os.rename(partial, root)
    except OSError:  # another run wrote it meanwhile
        shutil.rmtree(partial)
        if len(files(root)) != count:
            raise
    return root


def describe(root: Path) -> dict:
    """What a written set holds: images, mean and range of file sizes, bits per pixel."""
    import cv2

    paths = files(root)
    sizes = np.array([p.stat().st_size for p in paths])
    h, w = cv2.imread(str(paths[0])).shape[:2]
    return {"images": len(paths), "height": int(h), "width": int(w),
            "mean_kb": float(sizes.mean()) / 1e3, "min_kb": float(sizes.min()) / 1e3,
            "max_kb": float(sizes.max()) / 1e3, "bits_per_pixel": 8 * float(sizes.mean()) / (h * w)}
